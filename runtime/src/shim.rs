//! The exported MPI names.
//!
//! A Rust cdylib exports only the Rust items it defines: the C shim's functions, compiled
//! into a static archive, stay local to the library. So each intercepted name is a naked
//! Rust function that jumps straight to the shim's typed wrapper (`greenup_shim_NAME`,
//! runtime/shim/greenup_mpi.c). The jump leaves every argument register and the stack as
//! the caller set them, so the Rust side needs to know nothing of the MPI's handle types.

#[cfg(greenup_shim)]
macro_rules! trampolines {
    ($($name:ident)*) => {$(
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        #[allow(non_snake_case)]
        /// Intercepted MPI entry point (jumps to greenup's C wrapper).
        pub unsafe extern "C" fn $name() {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(concat!("jmp greenup_shim_", stringify!($name), "@PLT"));
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(concat!("b greenup_shim_", stringify!($name)));
        }
    )*};
}

#[cfg(greenup_shim)]
trampolines! {
    MPI_Init MPI_Init_thread MPI_Finalize
    MPI_Send MPI_Recv MPI_Sendrecv MPI_Probe
    MPI_Isend MPI_Issend MPI_Irsend MPI_Ibsend MPI_Irecv MPI_Request_free
    MPI_Wait MPI_Waitall MPI_Waitany MPI_Waitsome MPI_Test MPI_Testall MPI_Testany MPI_Testsome
    MPI_Barrier MPI_Bcast MPI_Reduce MPI_Allreduce MPI_Alltoall MPI_Alltoallv
    MPI_Allgather MPI_Allgatherv MPI_Gather MPI_Scatter
    MPI_Put MPI_Get MPI_Accumulate MPI_Get_accumulate
    MPI_Rput MPI_Rget MPI_Raccumulate MPI_Rget_accumulate
    MPI_Win_create MPI_Win_allocate MPI_Win_allocate_shared MPI_Win_create_dynamic
    MPI_Win_fence MPI_Win_flush MPI_Win_flush_all MPI_Win_flush_local MPI_Win_flush_local_all
    MPI_Win_lock MPI_Win_unlock MPI_Win_lock_all MPI_Win_unlock_all MPI_Win_wait MPI_Win_complete
}

// The Fortran names: `mpif.h` and `use mpi`, then `use mpi_f08` (and Open MPI 6's
// descriptor-passing `_f08ts_` names of the calls that take a buffer).
#[cfg(greenup_shim)]
trampolines! {
    mpi_init_ mpi_init_thread_ mpi_finalize_ mpi_send_ mpi_recv_ mpi_sendrecv_ mpi_isend_
    mpi_irecv_ mpi_wait_ mpi_waitall_ mpi_waitany_ mpi_waitsome_ mpi_test_ mpi_testall_
    mpi_testany_ mpi_testsome_ mpi_request_free_ mpi_barrier_ mpi_bcast_ mpi_reduce_
    mpi_allreduce_ mpi_alltoall_ mpi_allgather_ mpi_put_ mpi_get_ mpi_accumulate_ mpi_rput_
    mpi_rget_ mpi_win_fence_ mpi_win_flush_ mpi_win_unlock_ mpi_win_unlock_all_ mpi_win_wait_
    mpi_win_complete_
    mpi_init_f08_ mpi_init_thread_f08_ mpi_finalize_f08_ mpi_send_f08_ mpi_recv_f08_
    mpi_sendrecv_f08_ mpi_isend_f08_ mpi_irecv_f08_ mpi_wait_f08_ mpi_waitall_f08_
    mpi_waitany_f08_ mpi_waitsome_f08_ mpi_test_f08_ mpi_testall_f08_ mpi_testany_f08_
    mpi_testsome_f08_ mpi_request_free_f08_ mpi_barrier_f08_ mpi_bcast_f08_ mpi_reduce_f08_
    mpi_allreduce_f08_ mpi_alltoall_f08_ mpi_allgather_f08_ mpi_put_f08_ mpi_get_f08_
    mpi_accumulate_f08_ mpi_rput_f08_ mpi_rget_f08_ mpi_win_fence_f08_ mpi_win_flush_f08_
    mpi_win_unlock_f08_ mpi_win_unlock_all_f08_ mpi_win_wait_f08_ mpi_win_complete_f08_
    mpi_send_f08ts_ mpi_recv_f08ts_ mpi_sendrecv_f08ts_ mpi_isend_f08ts_ mpi_irecv_f08ts_
    mpi_bcast_f08ts_ mpi_reduce_f08ts_ mpi_allreduce_f08ts_ mpi_alltoall_f08ts_
    mpi_allgather_f08ts_ mpi_put_f08ts_ mpi_get_f08ts_ mpi_accumulate_f08ts_ mpi_rput_f08ts_
    mpi_rget_f08ts_
}
