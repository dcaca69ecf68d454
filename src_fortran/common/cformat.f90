! Numbers as text, the way C's printf writes them ("%d", "%.3e", "%g", "%.6f"), so that the Fortran programs
! print exactly the same lines as their C twins (Fortran's own ES edit descriptor would write
! "1.234E-15" where C writes "1.234e-15", and has nothing like "%g").
module course_cformat
    use, intrinsic :: iso_fortran_env, only: dp => real64, int64
    use, intrinsic :: ieee_arithmetic, only: ieee_is_finite, ieee_is_nan
    implicit none
    private
    public :: c_d, c_e, c_f, c_g

    ! like printf("%d", value), or printf("%ld", value) for a 64-bit value
    interface c_d
        module procedure c_d_int, c_d_int64
    end interface c_d

contains

function c_d_int(value) result(text)
    integer, intent(in) :: value
    character(len=:), allocatable :: text
    character(len=16) :: buf

    write(buf, '(i0)') value
    text = trim(buf)
end function c_d_int

function c_d_int64(value) result(text)
    integer(int64), intent(in) :: value
    character(len=:), allocatable :: text
    character(len=24) :: buf

    write(buf, '(i0)') value
    text = trim(buf)
end function c_d_int64

! like printf("%.<digits>e", value), e.g. c_e(1.234e-15_dp, 3) = "1.234e-15"
function c_e(value, digits) result(text)
    real(dp), intent(in) :: value
    integer, intent(in) :: digits           ! digits after the decimal point
    character(len=:), allocatable :: text
    character(len=64) :: mantissa
    logical :: negative
    integer :: expo

    if (.not. ieee_is_finite(value)) then
        text = non_finite(value)
        return
    end if
    call decimal_split(value, digits + 1, negative, mantissa, expo)
    text = mantissa(1:1)
    if (digits > 0) text = text // '.' // mantissa(2:digits + 1)
    text = text // exponent_text(expo)
    if (negative) text = '-' // text
end function c_e

! like printf("%.<digits>g", value) (printf("%g") is c_g(value, 6)): `digits` significant digits,
! fixed notation unless the exponent is < -4 or >= digits, trailing zeros removed
function c_g(value, digits) result(text)
    real(dp), intent(in) :: value
    integer, intent(in) :: digits
    character(len=:), allocatable :: text
    character(len=64) :: mantissa
    character(len=:), allocatable :: int_part, frac_part
    logical :: negative
    integer :: p, expo

    if (.not. ieee_is_finite(value)) then
        text = non_finite(value)
        return
    end if
    p = max(digits, 1)
    call decimal_split(value, p, negative, mantissa, expo)     ! value ~ d.ddd x 10^expo
    if (expo >= -4 .and. expo < p) then
        if (expo >= 0) then                  ! d..d.ddd: expo + 1 digits before the point
            int_part = mantissa(1:expo + 1)
            frac_part = mantissa(expo + 2:p)
        else                                 ! 0.000ddd: -expo - 1 zeros after the point
            int_part = '0'
            frac_part = repeat('0', -expo - 1) // mantissa(1:p)
        end if
        frac_part = without_trailing_zeros(frac_part)
        text = int_part
        if (len(frac_part) > 0) text = text // '.' // frac_part
    else
        frac_part = without_trailing_zeros(mantissa(2:p))
        text = mantissa(1:1)
        if (len(frac_part) > 0) text = text // '.' // frac_part
        text = text // exponent_text(expo)
    end if
    if (negative) text = '-' // text
end function c_g

! The first ndig significant decimal digits of a finite value (rounded, without the point) and its
! decimal exponent: |value| ~ d1.d2d3... x 10^expo. Fortran's ES edit descriptor does the rounding.
subroutine decimal_split(value, ndig, negative, mantissa, expo)
    real(dp), intent(in) :: value
    integer, intent(in) :: ndig
    logical, intent(out) :: negative
    character(len=*), intent(out) :: mantissa
    integer, intent(out) :: expo
    character(len=32) :: fmt
    character(len=128) :: buf
    integer :: epos

    write(fmt, '(a, i0, a, i0, a)') '(ES', ndig + 12, '.', ndig - 1, 'E4)'
    write(buf, fmt) value                     ! e.g. " -1.2346E+0005"
    buf = adjustl(buf)
    negative = buf(1:1) == '-'
    if (negative) buf = buf(2:)
    epos = index(buf, 'E')
    mantissa = buf(1:1) // buf(3:epos - 1)    ! the digits, without the point
    read(buf(epos + 1:), *) expo
end subroutine decimal_split

! "e+05", "e-15", "e+123": C writes at least two exponent digits
function exponent_text(expo) result(text)
    integer, intent(in) :: expo
    character(len=:), allocatable :: text
    character(len=16) :: buf

    write(buf, '(i0)') abs(expo)
    text = trim(buf)
    if (len(text) < 2) text = '0' // text
    if (expo < 0) then
        text = 'e-' // text
    else
        text = 'e+' // text
    end if
end function exponent_text

function without_trailing_zeros(digits) result(text)
    character(len=*), intent(in) :: digits
    character(len=:), allocatable :: text
    integer :: last

    last = len(digits)
    do while (last > 0)
        if (digits(last:last) /= '0') exit
        last = last - 1
    end do
    text = digits(1:last)
end function without_trailing_zeros

! like printf("%.<digits>f", value), digits >= 1 (Fortran's F0.d drops the zero before the point)
function c_f(value, digits) result(text)
    real(dp), intent(in) :: value
    integer, intent(in) :: digits
    character(len=:), allocatable :: text
    character(len=64) :: buffer
    character(len=16) :: edit

    if (.not. ieee_is_finite(value)) then
        text = non_finite(value)
        return
    end if
    write(edit, '(a, i0, a)') '(f0.', digits, ')'
    write(buffer, edit) value
    text = trim(buffer)
    if (text(1:1) == '.') then
        text = '0' // text
    else if (text(1:2) == '-.') then
        text = '-0' // text(2:)
    end if
end function c_f

function non_finite(value) result(text)
    real(dp), intent(in) :: value
    character(len=:), allocatable :: text

    if (ieee_is_nan(value)) then
        text = 'nan'
    else if (value > 0.0_dp) then
        text = 'inf'
    else
        text = '-inf'
    end if
end function non_finite

end module course_cformat
