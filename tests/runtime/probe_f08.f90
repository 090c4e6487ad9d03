! The `use mpi_f08` half of libgreenup_mpi's mechanism tests (run.sh): these calls reach
! Open MPI through mpi_*_f08_ entry points, which bypass both the C wrappers and the
! mpif.h ones. Rank 1 sleeps a second, then receives 1 MiB from rank 0 (MPI_Isend and
! MPI_Wait on rank 0, MPI_Irecv and MPI_Waitall on rank 1); then an Allreduce of one
! double and a Barrier; then one integer each way, completed by MPI_Testall and
! MPI_Testsome loops, and an MPI_Isend freed with MPI_Request_free. Each rank writes how many calls it made to calls-RANK in the
! directory given as the second argument, without an ierror argument (f08's is optional).
program probe_f08
  use mpi_f08
  implicit none
  integer, parameter :: n = 131072
  double precision :: buf(n), s, total
  type(MPI_Request) :: req(1), two(2)
  integer :: rank, i, made, u, mine, theirs, outcount, indices(2)
  logical :: done
  character(len=4096) :: dir
  call get_command_argument(2, dir)
  made = 0
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  do i = 1, n
    buf(i) = i
  end do
  if (rank == 0) then
    call MPI_Isend(buf, n, MPI_DOUBLE_PRECISION, 1, 7, MPI_COMM_WORLD, req(1))
    call MPI_Wait(req(1), MPI_STATUS_IGNORE)
  else
    call sleep(1)
    buf = 0
    call MPI_Irecv(buf, n, MPI_DOUBLE_PRECISION, 0, 7, MPI_COMM_WORLD, req(1))
    call MPI_Waitall(1, req, MPI_STATUSES_IGNORE)
  end if
  made = made + 2
  s = sum(buf)
  call MPI_Allreduce(s, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Barrier(MPI_COMM_WORLD)
  made = made + 2
  mine = rank + 40
  theirs = 0
  call MPI_Irecv(theirs, 1, MPI_INTEGER, 1 - rank, 8, MPI_COMM_WORLD, two(1))
  call MPI_Isend(mine, 1, MPI_INTEGER, 1 - rank, 8, MPI_COMM_WORLD, two(2))
  made = made + 2
  done = .false.
  do while (.not. done)
    call MPI_Testall(2, two, done, MPI_STATUSES_IGNORE)
    made = made + 1
  end do
  call MPI_Irecv(theirs, 1, MPI_INTEGER, 1 - rank, 9, MPI_COMM_WORLD, two(1))
  call MPI_Isend(mine, 1, MPI_INTEGER, 1 - rank, 9, MPI_COMM_WORLD, two(2))
  call MPI_Request_free(two(2))
  made = made + 2
  outcount = 0
  do while (outcount == 0)
    call MPI_Testsome(1, two, outcount, indices, MPI_STATUSES_IGNORE)
    made = made + 1
  end do
  call MPI_Barrier(MPI_COMM_WORLD)
  made = made + 1
  if (rank == 0) print '(a,i0)', 'from the peer ', theirs
  open(newunit=u, file=trim(dir)//'/calls-'//achar(48 + rank))
  write(u, '(i0)') made
  close(u)
  if (rank == 0) print '(a,f20.1)', 'checksum ', total
  call MPI_Finalize()
end program probe_f08
