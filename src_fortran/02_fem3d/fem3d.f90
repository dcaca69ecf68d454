! 3D steady heat conduction  -div(cond grad T) = Q  on a box of tri-linear hexahedra (8 nodes):
! element matrix by 2x2x2 Gauss quadrature, the 27-point sparsity pattern of the structured mesh,
! assembly into CRS and the load of a heat flux through boundary faces (Fortran twin of
! src_c/02_fem3d/fem3d.c).
!
! Arrays keep the C layout, read with the first index running fastest: xyz(d, n) is coordinate d
! of node n, elements(a, e) the global node of local node a of element e, faces(c, f) corner c of
! face f, ke(b, a) is C's ke[8a + b]. Node numbers and CRS indices are 1-based (row_ptr(1) = 1).
!
! Reference element [-1,1]^3; local node a sits at the corner (XI(a), ETA(a), ZETA(a)) and has the
! shape function N_a = (1 + xi XI(a)) (1 + eta ETA(a)) (1 + zeta ZETA(a)) / 8.
module course_fem3d
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use course_crs, only: crs_find
    implicit none
    private
    public :: fem3d_element, fem3d_pattern, fem3d_assemble, fem3d_face_flux
    public :: fem3d_nakajima_source, fem3d_element_source_load

    integer, parameter :: dp = c_double
    real(dp), parameter :: XI(8) = [-1, 1, 1, -1, -1, 1, 1, -1]
    real(dp), parameter :: ETA(8) = [-1, -1, 1, 1, -1, -1, 1, 1]
    real(dp), parameter :: ZETA(8) = [-1, -1, -1, -1, 1, 1, 1, 1]

contains

! N_a and its derivatives with respect to (xi, eta, zeta) at one point: dn(k, a) = dN_a / dxi_k
subroutine hex8_shape(x, y, z, n, dn)
    real(dp), intent(in) :: x, y, z
    real(dp), intent(out) :: n(8), dn(3, 8)
    real(dp) :: fx, fy, fz
    integer :: a

    do a = 1, 8
        fx = 1.0_dp + x * XI(a)
        fy = 1.0_dp + y * ETA(a)
        fz = 1.0_dp + z * ZETA(a)
        n(a) = 0.125_dp * fx * fy * fz
        dn(1, a) = 0.125_dp * XI(a) * fy * fz
        dn(2, a) = 0.125_dp * ETA(a) * fx * fz
        dn(3, a) = 0.125_dp * ZETA(a) * fx * fy
    end do
end subroutine hex8_shape

! Jacobian of the map from the reference element: jac(i, k) = dx_i / dxi_k = sum_a x_a,i dN_a/dxi_k
subroutine hex8_jacobian(xyz, dn, jac)
    real(dp), intent(in) :: xyz(3, 8), dn(3, 8)
    real(dp), intent(out) :: jac(3, 3)
    real(dp) :: s
    integer :: i, k, a

    do i = 1, 3
        do k = 1, 3
            s = 0.0_dp
            do a = 1, 8
                s = s + xyz(i, a) * dn(k, a)
            end do
            jac(i, k) = s
        end do
    end do
end subroutine hex8_jacobian

! Determinant and inverse of a 3x3 matrix by cofactors: inv = adj(m) / det(m). The inverse is
! computed only when det > 0 (the caller rejects the element otherwise).
function invert3(m, inv) result(det)
    real(dp), intent(in) :: m(3, 3)
    real(dp), intent(out) :: inv(3, 3)
    real(dp) :: det
    real(dp) :: c11, c12, c13

    c11 = m(2, 2) * m(3, 3) - m(2, 3) * m(3, 2)
    c12 = m(2, 3) * m(3, 1) - m(2, 1) * m(3, 3)
    c13 = m(2, 1) * m(3, 2) - m(2, 2) * m(3, 1)
    det = m(1, 1) * c11 + m(1, 2) * c12 + m(1, 3) * c13
    inv = 0.0_dp
    if (.not. (det > 0.0_dp)) return
    ! inv(i, j) = cofactor(j, i) / det
    inv(1, 1) = c11 / det
    inv(2, 1) = c12 / det
    inv(3, 1) = c13 / det
    inv(1, 2) = (m(1, 3) * m(3, 2) - m(1, 2) * m(3, 3)) / det
    inv(2, 2) = (m(1, 1) * m(3, 3) - m(1, 3) * m(3, 1)) / det
    inv(3, 2) = (m(1, 2) * m(3, 1) - m(1, 1) * m(3, 2)) / det
    inv(1, 3) = (m(1, 2) * m(2, 3) - m(1, 3) * m(2, 2)) / det
    inv(2, 3) = (m(1, 3) * m(2, 1) - m(1, 1) * m(2, 3)) / det
    inv(3, 3) = (m(1, 1) * m(2, 2) - m(1, 2) * m(2, 1)) / det
end function invert3

! [fem3d_element]
! Element conductivity matrix ke (8x8; ke(b, a) is C's ke[8a + b]) and load fe (8) of one
! tri-linear hexahedron with corners xyz(:, a) and nodal heat source q(a), by 2x2x2 Gauss
! quadrature (points +-1/sqrt(3), weights 1; zeta outermost, xi innermost):
!   ke_ab = sum_g cond (grad N_a . grad N_b) det J,   fe_a = sum_g N_a (sum_c N_c q_c) det J.
! The chain rule dN/dxi_k = sum_i (dx_i/dxi_k) dN/dx_i says grad_xi N = J^T grad_x N, hence the
! physical gradient grad_x N = J^-T grad_xi N, i.e. dN/dx_i = sum_k inv(J)(k, i) dN/dxi_k.
! Returns 0, or -1 if det J <= 0 at a Gauss point (an inverted or degenerate element).
function fem3d_element(xyz, cond, q, ke, fe) result(status) bind(C, name="fem3d_element")
    real(c_double), intent(in) :: xyz(3, 8)
    real(c_double), value, intent(in) :: cond
    real(c_double), intent(in) :: q(8)
    real(c_double), intent(out) :: ke(8, 8), fe(8)
    integer(c_int) :: status
    real(dp) :: pts(2), n(8), dn(3, 8), jac(3, 3), jinv(3, 3), grad(3, 8), det, q_here
    integer :: gx, gy, gz, a, b, i

    pts(2) = 1.0_dp / sqrt(3.0_dp)
    pts(1) = -pts(2)
    ke = 0.0_dp
    fe = 0.0_dp
    status = -1
    do gz = 1, 2
        do gy = 1, 2
            do gx = 1, 2
                call hex8_shape(pts(gx), pts(gy), pts(gz), n, dn)
                call hex8_jacobian(xyz, dn, jac)
                det = invert3(jac, jinv)
                if (.not. (det > 0.0_dp)) return
                q_here = 0.0_dp                      ! the source at this point, interpolated
                do a = 1, 8
                    q_here = q_here + n(a) * q(a)
                    do i = 1, 3
                        grad(i, a) = dn(1, a) * jinv(1, i) + dn(2, a) * jinv(2, i) &
                                     + dn(3, a) * jinv(3, i)
                    end do
                end do
                do a = 1, 8
                    fe(a) = fe(a) + n(a) * q_here * det
                    do b = 1, 8
                        ke(b, a) = ke(b, a) + cond * (grad(1, a) * grad(1, b) &
                                                      + grad(2, a) * grad(2, b) &
                                                      + grad(3, a) * grad(3, b)) * det
                    end do
                end do
            end do
        end do
    end do
    status = 0
end function fem3d_element
! [fem3d_element]

! [fem3d_pattern]
! Node (i,j,k) (0 <= i <= nx, ...) is number 1 + i + (nx+1) (j + (ny+1) k); it shares an element
! with the nodes (i+di, j+dj, k+dk), di, dj, dk in {-1, 0, 1}, that lie in the box: up to 27 per
! row. With dk outermost and di innermost the columns come out sorted. row_ptr has n_node + 1
! entries.
subroutine fem3d_pattern(nx, ny, nz, row_ptr, col_idx) bind(C, name="fem3d_pattern")
    integer(c_int), value, intent(in) :: nx, ny, nz
    integer(c_int), intent(out) :: row_ptr(*), col_idx(*)
    integer(c_int) :: px, py, pz, pos, i, j, k, ii, jj, kk

    px = nx + 1                                      ! nodes per direction
    py = ny + 1
    pz = nz + 1
    pos = 1                                          ! next free position in col_idx
    do k = 0, pz - 1
        do j = 0, py - 1
            do i = 0, px - 1
                row_ptr(1 + i + px * (j + py * k)) = pos
                do kk = k - 1, k + 1
                    do jj = j - 1, j + 1
                        do ii = i - 1, i + 1
                            if (ii >= 0 .and. ii < px .and. jj >= 0 .and. jj < py .and. &
                                kk >= 0 .and. kk < pz) then
                                col_idx(pos) = 1 + ii + px * (jj + py * kk)
                                pos = pos + 1
                            end if
                        end do
                    end do
                end do
            end do
        end do
    end do
    row_ptr(1 + px * py * pz) = pos                  ! = number of entries + 1
end subroutine fem3d_pattern
! [fem3d_pattern]

! [fem3d_assemble]
! Adds every element matrix into val and every element load into rhs (both hold zeros, or a
! previous sum, on entry). elements(a, e) is the global node of local node a of element e.
! Returns 0, or -e for the first element e whose Jacobian is not positive (C's -(e+1) with its
! 0-based e: the same number).
function fem3d_assemble(n_elem, elements, xyz, cond, q, row_ptr, col_idx, val, rhs) &
        result(status) bind(C, name="fem3d_assemble")
    integer(c_int), value, intent(in) :: n_elem
    integer(c_int), intent(in) :: elements(8, n_elem)
    real(c_double), intent(in) :: xyz(3, *)
    real(c_double), value, intent(in) :: cond
    real(c_double), intent(in) :: q(*)
    integer(c_int), intent(in) :: row_ptr(*), col_idx(*)
    real(c_double), intent(inout) :: val(*), rhs(*)
    integer(c_int) :: status
    real(dp) :: xyz_e(3, 8), q_e(8), ke(8, 8), fe(8)
    integer(c_int) :: e, a, b, k

    status = 0
    do e = 1, n_elem
        do a = 1, 8                                  ! gather the element's corners
            xyz_e(:, a) = xyz(:, elements(a, e))
            q_e(a) = q(elements(a, e))
        end do
        if (fem3d_element(xyz_e, cond, q_e, ke, fe) /= 0) then
            status = -e
            return
        end if
        do a = 1, 8                                  ! scatter into the global system
            rhs(elements(a, e)) = rhs(elements(a, e)) + fe(a)
            do b = 1, 8
                k = crs_find(row_ptr, col_idx, elements(a, e), elements(b, e))
                val(k) = val(k) + ke(b, a)
            end do
        end do
    end do
end function fem3d_assemble
! [fem3d_assemble]

! [fem3d_nakajima_source]
! The heat generation of Nakajima's FEM course code, constant on each element:
!   q_elem(e) = qvol |x_c + y_c|,  (x_c, y_c, z_c) the centroid of element e (the mean of its 8
! corners).
subroutine fem3d_nakajima_source(n_elem, elements, xyz, qvol, q_elem) &
        bind(C, name="fem3d_nakajima_source")
    integer(c_int), value, intent(in) :: n_elem
    integer(c_int), intent(in) :: elements(8, n_elem)
    real(c_double), intent(in) :: xyz(3, *)
    real(c_double), value, intent(in) :: qvol
    real(c_double), intent(out) :: q_elem(n_elem)
    real(dp) :: x_sum, y_sum
    integer(c_int) :: e, a

    do e = 1, n_elem
        x_sum = 0.0_dp
        y_sum = 0.0_dp
        do a = 1, 8
            x_sum = x_sum + xyz(1, elements(a, e))
            y_sum = y_sum + xyz(2, elements(a, e))
        end do
        q_elem(e) = qvol * abs(x_sum / 8.0_dp + y_sum / 8.0_dp)
    end do
end subroutine fem3d_nakajima_source
! [fem3d_nakajima_source]

! [fem3d_element_source_load]
! Adds the load of a heat source constant on each element, q_elem(e) on element e, into rhs:
!   rhs_a += q_elem(e) * integral of N_a over element e,
! which is fem3d_element's load fe with the nodal source q_elem(e) at all 8 corners (the N_c sum
! to 1). Returns 0, or -e for the first element e whose Jacobian is not positive (C's -(e+1)).
function fem3d_element_source_load(n_elem, elements, xyz, q_elem, rhs) result(status) &
        bind(C, name="fem3d_element_source_load")
    integer(c_int), value, intent(in) :: n_elem
    integer(c_int), intent(in) :: elements(8, n_elem)
    real(c_double), intent(in) :: xyz(3, *)
    real(c_double), intent(in) :: q_elem(n_elem)
    real(c_double), intent(inout) :: rhs(*)
    integer(c_int) :: status
    real(dp) :: xyz_e(3, 8), q_e(8), ke(8, 8), fe(8)
    integer(c_int) :: e, a

    status = 0
    do e = 1, n_elem
        do a = 1, 8                                  ! gather the element's corners
            xyz_e(:, a) = xyz(:, elements(a, e))
        end do
        q_e = q_elem(e)
        if (fem3d_element(xyz_e, 0.0_dp, q_e, ke, fe) /= 0) then
            status = -e
            return
        end if
        do a = 1, 8
            rhs(elements(a, e)) = rhs(elements(a, e)) + fe(a)
        end do
    end do
end function fem3d_element_source_load
! [fem3d_element_source_load]

! [fem3d_face_flux]
! Load of a heat flux qflux into the body through n_face bilinear quadrilaterals with the corners
! faces(:, f) (cyclic order), by 2x2 Gauss quadrature on the reference square [-1,1]^2, whose
! corner c sits at (S(c), T(c)) with N_c = (1 + s S(c)) (1 + t T(c)) / 4. The surface element
! dA = |dx/ds x dx/dt| ds dt is the area of the parallelogram spanned by the two tangent vectors:
!   rhs_c += sum_g N_c qflux |dx/ds x dx/dt|.
subroutine fem3d_face_flux(n_face, faces, xyz, qflux, rhs) bind(C, name="fem3d_face_flux")
    integer(c_int), value, intent(in) :: n_face
    integer(c_int), intent(in) :: faces(4, n_face)
    real(c_double), intent(in) :: xyz(3, *)
    real(c_double), value, intent(in) :: qflux
    real(c_double), intent(inout) :: rhs(*)
    real(dp), parameter :: S(4) = [-1.0_dp, 1.0_dp, 1.0_dp, -1.0_dp]
    real(dp), parameter :: T(4) = [-1.0_dp, -1.0_dp, 1.0_dp, 1.0_dp]
    real(dp) :: pts(2), ps, pt, n(4), ds(3), dt(3), x, cx, cy, cz, area
    integer(c_int) :: f, gs, gt, c, d

    pts(2) = 1.0_dp / sqrt(3.0_dp)
    pts(1) = -pts(2)
    do f = 1, n_face
        do gt = 1, 2
            do gs = 1, 2
                ps = pts(gs)
                pt = pts(gt)
                ds = 0.0_dp
                dt = 0.0_dp
                do c = 1, 4                          ! the tangents dx/ds and dx/dt
                    n(c) = 0.25_dp * (1.0_dp + ps * S(c)) * (1.0_dp + pt * T(c))
                    do d = 1, 3
                        x = xyz(d, faces(c, f))
                        ds(d) = ds(d) + x * 0.25_dp * S(c) * (1.0_dp + pt * T(c))
                        dt(d) = dt(d) + x * 0.25_dp * T(c) * (1.0_dp + ps * S(c))
                    end do
                end do
                cx = ds(2) * dt(3) - ds(3) * dt(2)
                cy = ds(3) * dt(1) - ds(1) * dt(3)
                cz = ds(1) * dt(2) - ds(2) * dt(1)
                area = sqrt(cx * cx + cy * cy + cz * cz)
                do c = 1, 4
                    rhs(faces(c, f)) = rhs(faces(c, f)) + n(c) * qflux * area
                end do
            end do
        end do
    end do
end subroutine fem3d_face_flux
! [fem3d_face_flux]

end module course_fem3d
