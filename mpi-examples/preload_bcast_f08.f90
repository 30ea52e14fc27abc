! A plain Fortran 2008 MPI program (`use mpi_f08`; it knows nothing of treecast) for the
! LD_PRELOAD interposer: MPI_Bcast of default integers, 0 .. 4 Mi elements, from every root on
! MPI_COMM_WORLD and a split communicator, half of the calls without the optional ierror (so
! the binding receives a NULL ierror). Every rank checks the data; world rank 0 prints every
! rank's checksum, so runs with and without LD_PRELOAD=libtreecast_preload.so can be compared.
!
!   mpifort -O2 -fno-inline -fno-ipa-cp mpi-examples/preload_bcast_f08.f90 -o preload_bcast_f08
!   mpirun -np 4 ./preload_bcast_f08
!
! All broadcasts go through subroutine bcast_ints (one call site with ierror, one without);
! prints "CHECK OK ..." when every rank verified every broadcast.
program preload_bcast_f08
  use mpi_f08
  implicit none
  integer, parameter :: nsizes = 6
  integer, parameter :: sizes(nsizes) = [0, 1, 7, 1024, 262145, 4194304]
  integer :: world_rank, world_size, failures, total
  type(MPI_Comm) :: split

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, world_rank)
  call MPI_Comm_size(MPI_COMM_WORLD, world_size)
  failures = 0
  call MPI_Comm_split(MPI_COMM_WORLD, mod(world_rank, 2), -world_rank, split)
  call check_ints('world', MPI_COMM_WORLD)
  call check_ints('split', split)
  call MPI_Comm_free(split)
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (world_rank == 0) then
    if (total == 0) then
      write (*, '(a,i0,a)') 'CHECK OK preload_bcast_f08 on ', world_size, ' ranks'
    else
      write (*, '(a,i0,a)') 'CHECK FAILED preload_bcast_f08: ', total, ' failures'
    end if
  end if
  call MPI_Finalize()
  if (total /= 0) stop 1

contains

  pure integer function pattern(seed, i)
    integer, intent(in) :: seed, i
    pattern = int(mod(int(i, 8) * 2654435_8 + int(seed, 8) * 40503_8, 1000003_8))
  end function

  subroutine bcast_ints(buf, n, root, comm, with_ierror)
    integer, intent(inout) :: buf(*)
    integer, intent(in) :: n, root
    type(MPI_Comm), intent(in) :: comm
    logical, intent(in) :: with_ierror
    integer :: ierr
    if (with_ierror) then
      call MPI_Bcast(buf, n, MPI_INTEGER, root, comm, ierr)
      if (ierr /= MPI_SUCCESS) failures = failures + 1
    else
      call MPI_Bcast(buf, n, MPI_INTEGER, root, comm)
    end if
  end subroutine

  subroutine check_ints(name, comm)
    character(*), intent(in) :: name
    type(MPI_Comm), intent(in) :: comm
    integer, allocatable :: buf(:)
    integer(8), allocatable :: all(:)
    integer :: rank, csize, max_size, s, n, root, seed, own, i
    integer(8) :: sum
    call MPI_Comm_rank(comm, rank)
    call MPI_Comm_size(comm, csize)
    call MPI_Allreduce(csize, max_size, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
    allocate (buf(sizes(nsizes)), all(world_size))
    do s = 1, nsizes
      n = sizes(s)
      do root = 0, max_size - 1
        sum = -1
        if (root < csize) then
          seed = 1000 * root + s
          own = seed
          if (rank /= root) own = 777 + world_rank
          do i = 1, n
            buf(i) = pattern(own, i)
          end do
          call bcast_ints(buf, n, root, comm, mod(root, 2) == 0)
          sum = 0
          do i = 1, n
            if (buf(i) /= pattern(seed, i)) then
              failures = failures + 1
              exit
            end if
            sum = mod(sum * 31_8 + int(buf(i), 8), 2147483647_8)
          end do
        end if
        call MPI_Gather(sum, 1, MPI_INTEGER8, all, 1, MPI_INTEGER8, 0, MPI_COMM_WORLD)
        if (world_rank == 0) write (*, '(a,a,i0,a,i0,a,*(1x,i0))') name, ' ints size=', n, ' root=', root, ':', all
      end do
    end do
  end subroutine
end program
