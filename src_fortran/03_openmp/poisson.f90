! The finite-volume Poisson problem of lecture 03 (Fortran twin of src_c/03_openmp/poisson.c):
! -div(grad phi) = f on a box of NX x NY x NZ cells of size DX x DY x DZ, 7-point stencil. Cell
! (i, j, k), each counted from 0, has the number c = 1 + i + NX (j + NY k) and its centre at
! ((i + 1/2) DX, (j + 1/2) DY, (k + 1/2) DZ). Two neighbouring cells are coupled by
! a = face area / centre distance: a_x = DY DZ / DX, a_y = DX DZ / DY, a_z = DX DY / DZ. phi = 0 on
! the top face z = NZ DZ, half a cell away from the top cells (2 a_z on their diagonal); the other
! faces are insulated. f = x + y + z at the centre, times the cell volume.
!
! Storage: the diagonal d(N) and the OFF-DIAGONAL part only (entries -a), in CRS (index(N+1),
! item, amat; 1-based, each row in increasing column order) or in ELL (6 entries per row, row c in
! 6(c-1)+1 .. 6c, short rows padded with the column of the row itself and the coefficient 0).
!
! parallel /= 0: every loop over the cells is `omp parallel do schedule(static)`, so the pages of
! d, b and the matrix are first touched by the threads that later use them in the solver (same
! static schedule over the same rows). parallel == 0: the same loops run on one thread.
module course_poisson
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    implicit none
    private
    public :: poi_gen_crs, poi_gen_ell

contains

! The neighbours of cell c in increasing order of their numbers: columns (1-based) and
! coefficients a > 0, and how many there are (3 to 6, fewer on tiny boxes).
pure subroutine neighbours(nx, ny, nz, ax, ay, az, c, m, col, coef)
    integer(c_int), intent(in) :: nx, ny, nz, c
    real(c_double), intent(in) :: ax, ay, az
    integer, intent(out) :: m
    integer(c_int), intent(out) :: col(6)
    real(c_double), intent(out) :: coef(6)
    integer(c_int) :: nxy, i, j, k

    nxy = nx * ny
    i = mod(c - 1, nx)
    j = mod((c - 1) / nx, ny)
    k = (c - 1) / nxy
    col = 0
    coef = 0.0_c_double
    m = 0
    if (k > 0) then
        m = m + 1
        col(m) = c - nxy
        coef(m) = az
    end if
    if (j > 0) then
        m = m + 1
        col(m) = c - nx
        coef(m) = ay
    end if
    if (i > 0) then
        m = m + 1
        col(m) = c - 1
        coef(m) = ax
    end if
    if (i < nx - 1) then
        m = m + 1
        col(m) = c + 1
        coef(m) = ax
    end if
    if (j < ny - 1) then
        m = m + 1
        col(m) = c + nx
        coef(m) = ay
    end if
    if (k < nz - 1) then
        m = m + 1
        col(m) = c + nxy
        coef(m) = az
    end if
end subroutine neighbours

! diagonal of a cell of layer k (from 0): the sum of its m coefficients, plus 2 a_z on the top
! layer (phi = 0 there)
pure function diagonal(nz, az, k, m, coef) result(s)
    integer(c_int), intent(in) :: nz, k
    real(c_double), intent(in) :: az, coef(6)
    integer, intent(in) :: m
    real(c_double) :: s
    integer :: l

    s = 0.0_c_double
    do l = 1, m
        s = s + coef(l)
    end do
    if (k == nz - 1) s = s + 2.0_c_double * az
end function diagonal

! right-hand side of cell (i, j, k) (from 0): (x + y + z) at the centre times the volume
pure function source(i, j, k, dx, dy, dz) result(f)
    integer(c_int), intent(in) :: i, j, k
    real(c_double), intent(in) :: dx, dy, dz
    real(c_double) :: f
    real(c_double) :: xc, yc, zc

    xc = (real(i, c_double) + 0.5_c_double) * dx
    yc = (real(j, c_double) + 0.5_c_double) * dy
    zc = (real(k, c_double) + 0.5_c_double) * dz
    f = ((xc + yc) + zc) * ((dx * dy) * dz)
end function source

! [poi_gen_crs]
! D, the off-diagonal part in CRS and b. Three sweeps over the cells: count the neighbours of
! every row into index(c+1), add them up (a short serial prefix sum), fill the rows.
subroutine poi_gen_crs(nx, ny, nz, dx, dy, dz, parallel, d, index, item, amat, b) &
        bind(C, name="poi_gen_crs")
    integer(c_int), value, intent(in) :: nx, ny, nz
    real(c_double), value, intent(in) :: dx, dy, dz
    integer(c_int), value, intent(in) :: parallel
    real(c_double), intent(out) :: d(nx * ny * nz), b(nx * ny * nz)
    integer(c_int), intent(out) :: index(nx * ny * nz + 1), item(*)
    real(c_double), intent(out) :: amat(*)
    integer(c_int) :: n, c, col(6)
    real(c_double) :: ax, ay, az, coef(6)
    integer :: m, l

    n = nx * ny * nz
    ax = (dy * dz) / dx
    ay = (dx * dz) / dy
    az = (dx * dy) / dz
    !$omp parallel do schedule(static) private(m, col, coef) if (parallel /= 0)
    do c = 1, n
        call neighbours(nx, ny, nz, ax, ay, az, c, m, col, coef)
        index(c + 1) = m
    end do
    !$omp end parallel do
    index(1) = 1
    do c = 1, n
        index(c + 1) = index(c + 1) + index(c)
    end do
    !$omp parallel do schedule(static) private(m, col, coef, l) if (parallel /= 0)
    do c = 1, n
        call neighbours(nx, ny, nz, ax, ay, az, c, m, col, coef)
        do l = 1, m
            item(index(c) + l - 1) = col(l)
            amat(index(c) + l - 1) = -coef(l)
        end do
        d(c) = diagonal(nz, az, (c - 1) / (nx * ny), m, coef)
        b(c) = source(mod(c - 1, nx), mod((c - 1) / nx, ny), (c - 1) / (nx * ny), dx, dy, dz)
    end do
    !$omp end parallel do
end subroutine poi_gen_crs
! [poi_gen_crs]

! [poi_gen_ell]
! The same matrix in ELL: row c is item_ell/amat_ell(6(c-1)+1 .. 6c), padded with (c, 0.0).
subroutine poi_gen_ell(nx, ny, nz, dx, dy, dz, parallel, d, item_ell, amat_ell, b) &
        bind(C, name="poi_gen_ell")
    integer(c_int), value, intent(in) :: nx, ny, nz
    real(c_double), value, intent(in) :: dx, dy, dz
    integer(c_int), value, intent(in) :: parallel
    real(c_double), intent(out) :: d(nx * ny * nz), b(nx * ny * nz)
    integer(c_int), intent(out) :: item_ell(6 * nx * ny * nz)
    real(c_double), intent(out) :: amat_ell(6 * nx * ny * nz)
    integer(c_int) :: n, c, col(6)
    real(c_double) :: ax, ay, az, coef(6)
    integer :: m, l

    n = nx * ny * nz
    ax = (dy * dz) / dx
    ay = (dx * dz) / dy
    az = (dx * dy) / dz
    !$omp parallel do schedule(static) private(m, col, coef, l) if (parallel /= 0)
    do c = 1, n
        call neighbours(nx, ny, nz, ax, ay, az, c, m, col, coef)
        do l = 1, 6
            if (l <= m) then
                item_ell(6 * (c - 1) + l) = col(l)
                amat_ell(6 * (c - 1) + l) = -coef(l)
            else
                item_ell(6 * (c - 1) + l) = c
                amat_ell(6 * (c - 1) + l) = 0.0_c_double
            end if
        end do
        d(c) = diagonal(nz, az, (c - 1) / (nx * ny), m, coef)
        b(c) = source(mod(c - 1, nx), mod((c - 1) / nx, ny), (c - 1) / (nx * ny), dx, dy, dz)
    end do
    !$omp end parallel do
end subroutine poi_gen_ell
! [poi_gen_ell]

end module course_poisson
