! The Fortran half of libgreenup_mpi's mechanism tests (run.sh): Open MPI's Fortran
! bindings call PMPI_ directly, so these calls reach greenup only through its mpi_*_
! wrappers. Rank 0 sends 1 MiB to rank 1, which receives it after a second; then an
! Allreduce of one double and a Barrier.
program probe
  implicit none
  include 'mpif.h'
  integer, parameter :: n = 131072
  double precision :: buf(n), s, total
  integer :: rank, ierr, i
  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, rank, ierr)
  do i = 1, n
    buf(i) = i
  end do
  if (rank == 0) then
    call mpi_send(buf, n, MPI_DOUBLE_PRECISION, 1, 7, MPI_COMM_WORLD, ierr)
  else
    call sleep(1)
    buf = 0
    call mpi_recv(buf, n, MPI_DOUBLE_PRECISION, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  end if
  s = sum(buf)
  call mpi_allreduce(s, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call mpi_barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,f20.1)', 'checksum ', total
  call mpi_finalize(ierr)
end program probe
