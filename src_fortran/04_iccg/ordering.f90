! Orderings of lecture 04_iccg on the graph (ptr, adj) of a symmetric matrix (Fortran twin of
! src_c/04_iccg/ordering.c; see course/ordering.py). Indices, levels and colors number from 1:
! ptr(1) = 1, order and adj hold unknowns 1 .. n, the first level and the first color are 1.
module course_ordering
    use, intrinsic :: iso_c_binding, only: c_int
    implicit none
    private
    public :: cuthill_mckee, wavefronts, multicolor, cyclic_colors, color_permutation

contains

! [cuthill_mckee]
subroutine cuthill_mckee(n, ptr, adj, order, level) bind(C, name="cuthill_mckee")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: ptr(n + 1), adj(*)
    integer(c_int), intent(out) :: order(n), level(n)
    logical, allocatable :: visited(:)
    integer(c_int) :: count, next_level, start, head, first, v, u, k, pos, degree

    allocate(visited(n))
    visited = .false.
    count = 0
    next_level = 1
    do while (count < n)                          ! one connected component per pass
        start = 0                                 ! the first unvisited node of least degree
        do v = 1, n
            if (visited(v)) cycle
            if (start == 0) then
                start = v
            else if (ptr(v + 1) - ptr(v) < ptr(start + 1) - ptr(start)) then
                start = v
            end if
        end do
        visited(start) = .true.
        count = count + 1
        order(count) = start
        level(start) = next_level
        head = count
        do while (head <= count)
            v = order(head)
            head = head + 1
            first = count + 1
            do k = ptr(v), ptr(v + 1) - 1
                u = adj(k)
                if (visited(u)) cycle
                visited(u) = .true.
                level(u) = level(v) + 1
                degree = ptr(u + 1) - ptr(u)
                count = count + 1                 ! among the new ones, by increasing degree
                pos = count
                do while (pos > first)
                    if (ptr(order(pos - 1) + 1) - ptr(order(pos - 1)) <= degree) exit
                    order(pos) = order(pos - 1)
                    pos = pos - 1
                end do
                order(pos) = u
            end do
        end do
        next_level = level(order(count)) + 1
    end do
end subroutine cuthill_mckee
! [cuthill_mckee]

! [wavefronts]
subroutine wavefronts(n, ptr, adj, order, level) bind(C, name="wavefronts")
    integer(c_int), value, intent(in) :: n
    integer(c_int), intent(in) :: ptr(n + 1), adj(*), order(n)
    integer(c_int), intent(out) :: level(n)
    integer(c_int), allocatable :: position(:)
    integer(c_int) :: k, v, j, lv

    allocate(position(n))
    do k = 1, n
        position(order(k)) = k
    end do
    do k = 1, n
        v = order(k)
        lv = 1
        do j = ptr(v), ptr(v + 1) - 1
            if (position(adj(j)) < k .and. level(adj(j)) + 1 > lv) lv = level(adj(j)) + 1
        end do
        level(v) = lv
    end do
end subroutine wavefronts
! [wavefronts]

! [multicolor]
function multicolor(n, ptr, adj, target_colors, color) result(ncolor) bind(C, name="multicolor")
    integer(c_int), value, intent(in) :: n, target_colors
    integer(c_int), intent(in) :: ptr(n + 1), adj(*)
    integer(c_int), intent(out) :: color(n)
    integer(c_int) :: ncolor
    integer(c_int), allocatable :: blocked(:)         ! blocked(v) = c: a neighbour has color c
    integer(c_int) :: target, left, size, v, k

    target = int((int(n, 8) + target_colors - 1) / target_colors, c_int)
    allocate(blocked(n))
    blocked = 0
    color = 0
    left = n
    ncolor = 0
    do while (left > 0)
        ncolor = ncolor + 1
        size = 0
        do v = 1, n
            if (size >= target) exit
            if (color(v) > 0 .or. blocked(v) == ncolor) cycle
            color(v) = ncolor
            size = size + 1
            left = left - 1
            do k = ptr(v), ptr(v + 1) - 1
                blocked(adj(k)) = ncolor
            end do
        end do
    end do
end function multicolor
! [multicolor]

! [cyclic_colors]
function cyclic_colors(n, ptr, adj, order, level, target_colors, color) result(ncolor) &
        bind(C, name="cyclic_colors")
    integer(c_int), value, intent(in) :: n, target_colors
    integer(c_int), intent(in) :: ptr(n + 1), adj(*), order(n), level(n)
    integer(c_int), intent(out) :: color(n)
    integer(c_int) :: ncolor
    integer(c_int), allocatable :: held(:)            ! held(c) = v: a neighbour of v has c
    integer(c_int) :: k, v, j, t, c, candidate
    integer :: alloc_stat

    ncolor = -1
    allocate(held(n + target_colors), stat=alloc_stat)
    if (alloc_stat /= 0) return
    held = 0
    color = 0
    ncolor = 0
    do k = 1, n
        v = order(k)
        do j = ptr(v), ptr(v + 1) - 1
            if (color(adj(j)) > 0) held(color(adj(j))) = v
        end do
        c = 0
        do t = 0, target_colors - 1
            candidate = mod(level(v) - 1 + t, target_colors) + 1
            if (held(candidate) /= v) then
                c = candidate
                exit
            end if
        end do
        if (c == 0) then                              ! all K held: a new color beyond K
            c = target_colors + 1
            do while (held(c) == v)
                c = c + 1
            end do
        end if
        color(v) = c
        ncolor = max(ncolor, c)
    end do
end function cyclic_colors
! [cyclic_colors]

subroutine color_permutation(n, ncolor, color, within, perm, color_ptr) &
        bind(C, name="color_permutation")
    integer(c_int), value, intent(in) :: n, ncolor
    integer(c_int), intent(in) :: color(n), within(n)
    integer(c_int), intent(out) :: perm(n), color_ptr(ncolor + 1)
    integer(c_int), allocatable :: next(:)
    integer(c_int) :: c, v, k

    color_ptr = 0
    color_ptr(1) = 1
    do v = 1, n
        color_ptr(color(v) + 1) = color_ptr(color(v) + 1) + 1
    end do
    do c = 1, ncolor
        color_ptr(c + 1) = color_ptr(c + 1) + color_ptr(c)
    end do
    allocate(next(ncolor))
    next = color_ptr(1:ncolor)
    do k = 1, n                                       ! stable: `within` order inside a color
        perm(next(color(within(k)))) = within(k)
        next(color(within(k))) = next(color(within(k))) + 1
    end do
end subroutine color_permutation

end module course_ordering
