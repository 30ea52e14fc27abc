! A plain Fortran MPI program (`use mpi`; it knows nothing of treecast) for the LD_PRELOAD
! interposer: MPI_Bcast of MPI_BYTE messages of 0, 1, 7, 4096, 1 MiB + 3 and 16 MiB from every
! root on MPI_COMM_WORLD and on a split communicator. After every broadcast each rank checks the
! data and world rank 0 prints every rank's checksum, so runs with and without
! LD_PRELOAD=libtreecast_preload.so can be compared line by line. Also broadcasts 64 integers
! from MPI_BOTTOM with an absolute-address datatype, from every root on the world.
!
!   mpifort -O2 -fno-inline -fno-ipa-cp mpi-examples/preload_bcast.f90 -o preload_bcast_f
!   mpirun -np 4 ./preload_bcast_f
!
! All byte broadcasts go through subroutine bcast_bytes (one call site); prints "CHECK OK ..."
! at the end when every rank verified every broadcast.
program preload_bcast
  use mpi
  implicit none
  integer, parameter :: nsizes = 6
  integer, parameter :: sizes(nsizes) = [0, 1, 7, 4096, 1048579, 16777216]
  integer :: ierr, world_rank, world_size, split, failures, total

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, world_rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, world_size, ierr)
  failures = 0
  call MPI_Comm_split(MPI_COMM_WORLD, mod(world_rank, 2), -world_rank, split, ierr)
  call check_bytes('world', MPI_COMM_WORLD)
  call check_bytes('split', split)
  call check_bottom()
  call MPI_Comm_free(split, ierr)
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (world_rank == 0) then
    if (total == 0) then
      write (*, '(a,i0,a)') 'CHECK OK preload_bcast_f on ', world_size, ' ranks'
    else
      write (*, '(a,i0,a)') 'CHECK FAILED preload_bcast_f: ', total, ' failures'
    end if
  end if
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1

contains

  ! Deterministic byte pattern for (seed, position), as a signed 1-byte integer.
  pure integer(1) function pattern(seed, i)
    integer, intent(in) :: seed, i
    pattern = int(mod(int(i, 8) * 7_8 + int(seed, 8) * 13_8 + int(i / 251, 8), 251_8) - 120_8, 1)
  end function

  ! Position-sensitive checksum below 2**31 (no overflow in 64-bit arithmetic).
  integer(8) function checksum(buf, n)
    integer(1), intent(in) :: buf(:)
    integer, intent(in) :: n
    integer :: i
    checksum = 0
    do i = 1, n
      checksum = mod(checksum * 31_8 + int(buf(i), 8) + 129_8, 2147483647_8)
    end do
  end function

  ! The only MPI_Bcast call of MPI_BYTE messages.
  subroutine bcast_bytes(buf, n, root, comm)
    integer(1), intent(inout) :: buf(*)
    integer, intent(in) :: n, root, comm
    integer :: ierr
    call MPI_Bcast(buf, n, MPI_BYTE, root, comm, ierr)
    if (ierr /= MPI_SUCCESS) failures = failures + 1
  end subroutine

  ! Gather every world rank's checksum (-1: no data) and print them from world rank 0.
  subroutine report(what, sum)
    character(*), intent(in) :: what
    integer(8), intent(in) :: sum
    integer(8), allocatable :: all(:)
    integer :: ierr
    allocate (all(world_size))
    call MPI_Gather(sum, 1, MPI_INTEGER8, all, 1, MPI_INTEGER8, 0, MPI_COMM_WORLD, ierr)
    if (world_rank == 0) write (*, '(a,a,*(1x,i0))') what, ':', all
  end subroutine

  subroutine check_bytes(name, comm)
    character(*), intent(in) :: name
    integer, intent(in) :: comm
    integer(1), allocatable :: buf(:)
    integer :: rank, csize, max_size, s, n, root, seed, own, i, bad
    integer(8) :: sum
    character(80) :: what
    call MPI_Comm_rank(comm, rank, ierr)
    call MPI_Comm_size(comm, csize, ierr)
    call MPI_Allreduce(csize, max_size, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
    allocate (buf(sizes(nsizes) + 1))
    do s = 1, nsizes
      n = sizes(s)
      do root = 0, max_size - 1
        sum = -1
        if (root < csize) then
          seed = 1000 * root + s
          own = seed
          if (rank /= root) own = 77777 + world_rank
          do i = 1, n
            buf(i) = pattern(own, i)
          end do
          buf(n + 1) = 90
          call bcast_bytes(buf, n, root, comm)
          bad = 0
          do i = 1, n
            if (buf(i) /= pattern(seed, i)) then
              bad = i
              exit
            end if
          end do
          if (bad /= 0 .or. buf(n + 1) /= 90) then
            write (0, '(a,1x,a,i0,a,i0,a,i0,a,i0)') name, 'size ', n, ' root ', root, ' rank ', rank, &
              ': wrong data at byte ', bad
            failures = failures + 1
          end if
          sum = checksum(buf, n + 1)
        end if
        write (what, '(a,a,i0,a,i0)') name, ' bytes size=', n, ' root=', root
        call report(trim(what), sum)
      end do
    end do
  end subroutine

  ! 64 integers at an absolute address, broadcast from MPI_BOTTOM.
  subroutine check_bottom()
    integer, target, save :: absbuf(64)
    integer(kind=MPI_ADDRESS_KIND) :: addr(1)
    integer :: abs_type, root, i, ierr
    integer(8) :: sum
    character(40) :: what
    call MPI_Get_address(absbuf, addr(1), ierr)
    call MPI_Type_create_struct(1, [64], addr, [MPI_INTEGER], abs_type, ierr)
    call MPI_Type_commit(abs_type, ierr)
    do root = 0, world_size - 1
      do i = 1, 64
        absbuf(i) = 0
        if (world_rank == root) absbuf(i) = 5 * i + root
      end do
      call MPI_Bcast(MPI_BOTTOM, 1, abs_type, root, MPI_COMM_WORLD, ierr)
      sum = 0
      do i = 1, 64
        if (absbuf(i) /= 5 * i + root) failures = failures + 1
        sum = mod(sum * 31_8 + int(absbuf(i), 8), 2147483647_8)
      end do
      write (what, '(a,i0)') 'world bottom root=', root
      call report(trim(what), sum)
    end do
    call MPI_Type_free(abs_type, ierr)
  end subroutine
end program
