! 1D steady heat conduction  -d/dx(cond dT/dx) = qvol  on [x_1, x_N+1] with linear elements:
! element matrix, sparsity pattern, assembly into CRS, boundary conditions (Fortran twin of
! src_c/01_fem1d/fem1d.c). Nodes 1..n_elem+1, element e joins nodes e and e+1; CRS indices are
! 1-based (row_ptr(1) = 1, columns 1..n_node).
module course_fem1d
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use course_crs, only: crs_find
    implicit none
    private
    public :: fem1d_element, fem1d_pattern, fem1d_assemble, fem1d_boundary

contains

! [fem1d_element]
! Linear element of length h:  ke = cond/h [ 1 -1; -1 1 ],  fe = qvol h/2 [ 1; 1 ].
! ke is stored row by row, as in C (ke(1) = k11, ke(2) = k12, ke(3) = k21, ke(4) = k22).
subroutine fem1d_element(h, cond, qvol, ke, fe) bind(C, name="fem1d_element")
    real(c_double), value, intent(in) :: h, cond, qvol
    real(c_double), intent(out) :: ke(4), fe(2)
    real(c_double) :: k

    k = cond / h
    ke(1) = k
    ke(2) = -k
    ke(3) = -k
    ke(4) = k
    fe(1) = 0.5_c_double * qvol * h
    fe(2) = 0.5_c_double * qvol * h
end subroutine fem1d_element
! [fem1d_element]

! [fem1d_pattern]
! Node i is coupled to its neighbours i-1 and i+1: a tridiagonal pattern with 3 n_node - 2 entries.
! row_ptr has n_node + 1 entries, col_idx 3 n_node - 2; columns are sorted within each row.
subroutine fem1d_pattern(n_node, row_ptr, col_idx) bind(C, name="fem1d_pattern")
    integer(c_int), value, intent(in) :: n_node
    integer(c_int), intent(out) :: row_ptr(n_node + 1), col_idx(*)
    integer(c_int) :: i, j, k

    k = 1                                   ! next free position in col_idx
    do i = 1, n_node
        row_ptr(i) = k
        do j = i - 1, i + 1
            if (j >= 1 .and. j <= n_node) then
                col_idx(k) = j
                k = k + 1
            end if
        end do
    end do
    row_ptr(n_node + 1) = k                 ! = number of entries + 1
end subroutine fem1d_pattern
! [fem1d_pattern]

! [fem1d_assemble]
! Adds every element matrix into val (which must hold zeros, or a previous sum, on entry) and every
! element load into rhs. Element e has the global nodes {e, e+1}.
subroutine fem1d_assemble(n_elem, x, cond, qvol, row_ptr, col_idx, val, rhs) &
        bind(C, name="fem1d_assemble")
    integer(c_int), value, intent(in) :: n_elem
    real(c_double), intent(in) :: x(n_elem + 1)
    real(c_double), value, intent(in) :: cond, qvol
    integer(c_int), intent(in) :: row_ptr(n_elem + 2), col_idx(*)
    real(c_double), intent(inout) :: val(*), rhs(n_elem + 1)
    real(c_double) :: ke(4), fe(2)
    integer(c_int) :: e, a, b, k, node(2)

    do e = 1, n_elem
        call fem1d_element(x(e + 1) - x(e), cond, qvol, ke, fe)
        node = [e, e + 1]
        do a = 1, 2
            rhs(node(a)) = rhs(node(a)) + fe(a)
            do b = 1, 2
                k = crs_find(row_ptr, col_idx, node(a), node(b))
                val(k) = val(k) + ke(2 * (a - 1) + b)    ! k_ab, stored row by row
            end do
        end do
    end do
end subroutine fem1d_assemble
! [fem1d_assemble]

! [fem1d_boundary]
! T = 0 at node 1: row 1 and column 1 become those of the identity, rhs(1) = 0 (zeroing the column
! too keeps the matrix symmetric; since T_1 = 0 nothing moves to the right-hand side).
! Heat flux qflux = cond dT/dx at the last node: a natural condition, added to the load.
subroutine fem1d_boundary(n_node, qflux, row_ptr, col_idx, val, rhs) bind(C, name="fem1d_boundary")
    integer(c_int), value, intent(in) :: n_node
    real(c_double), value, intent(in) :: qflux
    integer(c_int), intent(in) :: row_ptr(n_node + 1), col_idx(*)
    real(c_double), intent(inout) :: val(*), rhs(n_node)
    integer(c_int) :: i, k

    do i = 1, n_node
        do k = row_ptr(i), row_ptr(i + 1) - 1
            if (i == 1 .or. col_idx(k) == 1) then
                if (col_idx(k) == i) then
                    val(k) = 1.0_c_double           ! the diagonal entry (1, 1)
                else
                    val(k) = 0.0_c_double
                end if
            end if
        end do
    end do
    rhs(1) = 0.0_c_double
    rhs(n_node) = rhs(n_node) + qflux
end subroutine fem1d_boundary
! [fem1d_boundary]

end module course_fem1d
