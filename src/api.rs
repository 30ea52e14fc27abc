//! The Rust API: `comm.topo_bcast(&mut buf, root)` on any rsmpi communicator.
//!
//! ```no_run
//! use mpi::traits::*;
//! use treecast::TopoBcast;
//!
//! let universe = mpi::initialize().unwrap();
//! let world = universe.world();
//! let mut data = vec![0u64; 1024];
//! if world.rank() == 0 {
//!     data.iter_mut().enumerate().for_each(|(i, x)| *x = i as u64);
//! }
//! world.topo_bcast(&mut data[..], 0).expect("broadcast failed");
//! ```

use crate::error::Result;
use crate::profile::CallSite;
pub use crate::runtime::route::{Route, RouteState};
use mpi::datatype::{Datatype, DynBufferMut, MutView};
use mpi::ffi::MPI_Datatype;
use mpi::raw::AsRaw;
use mpi::traits::{AsDatatype, Collection, Communicator, Equivalence, PointerMut};
use mpi::Rank;
use std::ffi::c_void;

/// A buffer `topo_bcast` can fill: a pointer, a number of elements and their MPI datatype.
///
/// Unlike rsmpi's `BufferMut`, the count is 64-bit, so slices of more than 2^31 elements
/// (e.g. 3 GiB of `u8`) work.
///
/// # Safety
/// Implementations must describe memory that is valid for `count` elements of `datatype`.
pub unsafe trait TopoBuffer {
    /// `(pointer, element count, datatype)`.
    fn topo_raw(&mut self) -> (*mut c_void, u64, MPI_Datatype);
}

unsafe impl<T: Equivalence> TopoBuffer for [T] {
    fn topo_raw(&mut self) -> (*mut c_void, u64, MPI_Datatype) {
        (
            self.as_mut_ptr() as *mut c_void,
            self.len() as u64,
            T::equivalent_datatype().as_raw(),
        )
    }
}

unsafe impl<T: Equivalence> TopoBuffer for Vec<T> {
    fn topo_raw(&mut self) -> (*mut c_void, u64, MPI_Datatype) {
        self.as_mut_slice().topo_raw()
    }
}

unsafe impl<T: Equivalence, const N: usize> TopoBuffer for [T; N] {
    fn topo_raw(&mut self) -> (*mut c_void, u64, MPI_Datatype) {
        self.as_mut_slice().topo_raw()
    }
}

/// User-defined (e.g. strided vector) datatypes over a buffer, as rsmpi builds them with
/// `MutView::with_count_and_datatype`.
unsafe impl<D: Datatype, B: ?Sized + PointerMut> TopoBuffer for MutView<'_, '_, D, B> {
    fn topo_raw(&mut self) -> (*mut c_void, u64, MPI_Datatype) {
        let count = self.count().max(0) as u64;
        (self.pointer_mut(), count, self.as_datatype().as_raw())
    }
}

unsafe impl TopoBuffer for DynBufferMut<'_> {
    fn topo_raw(&mut self) -> (*mut c_void, u64, MPI_Datatype) {
        let count = self.count().max(0) as u64;
        (self.pointer_mut(), count, self.as_datatype().as_raw())
    }
}

/// Topology-aware broadcast on rsmpi communicators.
pub trait TopoBcast {
    /// Broadcast `buf` from `root` to every rank of the communicator, like `MPI_Bcast`.
    ///
    /// The first call on a communicator is collective set-up (it duplicates the communicator and
    /// learns the network); later calls reuse it. Errors name what is wrong; a rank whose buffer
    /// does not match the root's gets `Err`, and so do the ranks that receive through it.
    #[track_caller]
    fn topo_bcast<B: TopoBuffer + ?Sized>(&self, buf: &mut B, root: Rank) -> Result<()>;

    /// Collective: set up treecast for this communicator now rather than at the first broadcast.
    fn topo_init(&self) -> Result<()>;

    /// Local: the route broadcasts of `bytes` bytes from `root` take on this communicator —
    /// treecast's plan, the library's `MPI_Bcast`, still on trial (the first calls of a root
    /// and size class may time both), or unseen. The same on every rank after the same calls.
    /// A benchmark of the settled route calls until this is [`RouteState::Settled`].
    fn topo_route(&self, root: Rank, bytes: u64) -> Result<RouteState>;
}

impl<C: Communicator> TopoBcast for C {
    #[track_caller]
    fn topo_bcast<B: TopoBuffer + ?Sized>(&self, buf: &mut B, root: Rank) -> Result<()> {
        let site = CallSite::Rust(std::panic::Location::caller());
        let (ptr, count, dt) = buf.topo_raw();
        let count = i64::try_from(count).map_err(|_| {
            crate::error::Error::new(crate::error::ErrorKind::Count, format!("count {count} is too large"))
        })?;
        // SAFETY: `TopoBuffer` guarantees the memory; the communicator handle is valid.
        crate::error::catch_panic(|| unsafe { crate::runtime::bcast(self.as_raw(), ptr, count, dt, root, site) })
    }

    fn topo_route(&self, root: Rank, bytes: u64) -> Result<RouteState> {
        crate::runtime::bcast::check_root(root, self.size())?;
        // SAFETY: valid communicator handle.
        unsafe { crate::runtime::state::route_state(self.as_raw(), root as u32, bytes) }
    }

    fn topo_init(&self) -> Result<()> {
        // SAFETY: valid communicator handle.
        crate::error::catch_panic(|| unsafe {
            crate::runtime::state::check_comm(self.as_raw())?;
            crate::runtime::state::get_or_create(self.as_raw()).map(|_| ())
        })
    }
}
