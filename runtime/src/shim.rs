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
    MPI_Send MPI_Recv MPI_Sendrecv MPI_Wait MPI_Waitall MPI_Waitany MPI_Waitsome MPI_Probe
    MPI_Barrier MPI_Bcast MPI_Reduce MPI_Allreduce MPI_Alltoall MPI_Alltoallv
    MPI_Allgather MPI_Allgatherv MPI_Gather MPI_Scatter
    MPI_Put MPI_Get MPI_Accumulate MPI_Get_accumulate
    MPI_Win_fence MPI_Win_flush MPI_Win_flush_all MPI_Win_flush_local MPI_Win_flush_local_all
    MPI_Win_lock MPI_Win_unlock MPI_Win_lock_all MPI_Win_unlock_all MPI_Win_wait MPI_Win_complete
    mpi_init_ mpi_init_thread_ mpi_finalize_
    mpi_send_ mpi_recv_ mpi_sendrecv_ mpi_wait_ mpi_waitall_
    mpi_barrier_ mpi_bcast_ mpi_reduce_ mpi_allreduce_ mpi_alltoall_ mpi_allgather_
    mpi_put_ mpi_get_ mpi_accumulate_
    mpi_win_fence_ mpi_win_flush_ mpi_win_unlock_ mpi_win_unlock_all_
}
