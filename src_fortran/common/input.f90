! Reading Nakajima-style input files (Fortran twin of src_c/common/input.c): one group of values per
! line, anything after the values is a comment. Values are separated by blanks, tabs or commas;
! reals may be written 1.0e-8 or 1.0d-8. Every error prints one line naming the program, the file,
! the line and what was expected, and stops the program with exit status 2.
!
! For MPI programs, where every rank reads the same file and fails the same way: input_quiet (set on
! the ranks other than 0) keeps the message to one copy, and input_before_exit (if associated) is
! called just before the stop, e.g. to call MPI_Finalize on every rank.
!
! input_line and input_parse_ints are the two halves of input_ints, for a line that may hold other
! things (fem3d_mpi's line 7: PX PY PZ or `local PREFIX`); input_line, input_parse_reals and
! input_next_word those of input_reals, for a line with a word after the values (fem3d's line 3).
! read_line, parse_int and parse_real serve readers that report errors instead of stopping
! (05_halo/local_data.f90: one file per MPI rank, so that the ranks must first agree on which of
! them reports).
module course_input
    use, intrinsic :: iso_fortran_env, only: dp => real64, int64, error_unit
    use, intrinsic :: ieee_arithmetic, only: ieee_is_finite
    use course_cformat, only: c_d, c_g
    implicit none
    private
    public :: input_file, input_open, input_close, input_ints, input_reals, input_require_positive
    public :: input_choice, input_fail, input_quiet, input_before_exit
    public :: input_line, input_parse_ints, read_line, parse_int, parse_real, max_line
    public :: input_parse_reals, input_next_word

    abstract interface
        subroutine input_exit_hook()
        end subroutine input_exit_hook
    end interface

    logical :: input_quiet = .false.                               ! no messages if .true.
    procedure(input_exit_hook), pointer :: input_before_exit => null()

    ! the same limits as the C reader (its line buffer holds 1024 bytes, a token 128)
    integer, parameter :: max_line = 1022
    integer, parameter :: max_token = 127

    type :: input_file
        character(len=:), allocatable :: prog    ! program name, for messages
        character(len=:), allocatable :: path    ! file name, for messages
        integer :: unit = -1
        integer :: line = 0                      ! number of the line read last
    end type input_file

contains

! Print "PROG: PATH:LINE: message" on stderr and stop with exit status 2.
subroutine input_fail(in, message)
    type(input_file), intent(in) :: in
    character(len=*), intent(in) :: message

    call report(in%prog // ': ' // in%path // ':' // c_d(in%line) // ': ' // message)
    call stop_bad_input()
end subroutine input_fail

! the message on stderr, unless input_quiet
subroutine report(message)
    character(len=*), intent(in) :: message

    if (.not. input_quiet) write(error_unit, '(a)') message
end subroutine report

! Exit status 2, after input_before_exit (if any). (QUIET= (Fortran 2018) keeps the runtime from
! adding a "STOP 2" line of its own.)
subroutine stop_bad_input()
    if (associated(input_before_exit)) call input_before_exit()
    stop 2, quiet=.true.
end subroutine stop_bad_input

subroutine input_open(in, prog, path)
    type(input_file), intent(out) :: in
    character(len=*), intent(in) :: prog, path
    character(len=512) :: msg
    character(len=:), allocatable :: reason
    integer :: ios, k

    in%prog = prog
    in%path = path
    in%line = 0
    open(newunit=in%unit, file=path, status='old', action='read', iostat=ios, iomsg=msg)
    if (ios /= 0) then
        ! gfortran's message reads "Cannot open file 'PATH': REASON"; print only REASON, like C's
        ! strerror(errno)
        reason = trim(msg)
        k = index(reason, "': ", back=.true.)
        if (k > 0) reason = reason(k + 3:)
        call report(prog // ': ' // path // ': cannot open input file: ' // reason)
        call stop_bad_input()
    end if
end subroutine input_open

subroutine input_close(in)
    type(input_file), intent(inout) :: in

    close(in%unit)
    in%unit = -1
end subroutine input_close

! Read the next line of `unit` into `line`, of any length up to max_len + 1 characters (a longer
! line is cut there). ios: 0, or the iostat of the failure (end of file, or a read error).
subroutine read_line(unit, line, ios, max_len)
    integer, intent(in) :: unit
    character(len=:), allocatable, intent(out) :: line
    integer, intent(out) :: ios
    integer, intent(in) :: max_len
    character(len=256) :: chunk
    integer :: nread

    line = ''
    do                                    ! the line piece by piece, until its end
        read(unit, '(a)', advance='no', iostat=ios, size=nread) chunk
        line = line // chunk(1:nread)
        if (is_iostat_eor(ios)) then      ! end of the line (also for a last line without newline)
            ios = 0
            return
        end if
        if (ios /= 0 .or. len(line) > max_len) return
    end do
end subroutine read_line

! Read the next line into `line`; a missing line is an error.
subroutine input_line(in, line, what)
    type(input_file), intent(inout) :: in
    character(len=:), allocatable, intent(out) :: line
    character(len=*), intent(in) :: what
    integer :: ios

    in%line = in%line + 1
    call read_line(in%unit, line, ios, max_line)
    ! end of file, or a read error: both count as a missing line, as in C (fgets fails)
    if (ios /= 0) call input_fail(in, 'missing line, expected ' // what)
    if (len(line) > max_line) call input_fail(in, 'line longer than ' // c_d(max_line) // ' characters')
end subroutine input_line

logical function is_separator(c)
    character(len=1), intent(in) :: c

    is_separator = c == ' ' .or. c == ',' .or. c == achar(9) .or. c == achar(13) .or. c == achar(10)
end function is_separator

! The next token of line(pos:) (pos moves past it); .false. if there is none (or it is longer than
! max_token, which C's reader treats the same way).
logical function next_token(line, pos, token)
    character(len=*), intent(in) :: line
    integer, intent(inout) :: pos
    character(len=:), allocatable, intent(out) :: token
    integer :: first, last

    first = pos                           ! skip the separators
    do while (first <= len(line))
        if (.not. is_separator(line(first:first))) exit
        first = first + 1
    end do
    last = first - 1                      ! the token is line(first:last)
    do while (last < len(line))
        if (is_separator(line(last + 1:last + 1))) exit
        last = last + 1
    end do
    next_token = last >= first .and. last - first + 1 <= max_token
    if (next_token) then
        token = line(first:last)
        pos = last + 1
    else
        token = ''
    end if
end function next_token

logical function is_digit(c)
    character(len=1), intent(in) :: c

    is_digit = c >= '0' .and. c <= '9'
end function is_digit

! An integer: an optional sign and decimal digits only ("1.5", "1e3", "abc" are not integers),
! in the range of the default integer (C's int).
logical function parse_int(token, value)
    character(len=*), intent(in) :: token
    integer, intent(out) :: value
    integer(int64) :: wide
    integer :: i, first, ios

    parse_int = .false.
    value = 0
    if (len(token) == 0) return
    first = 1
    if (token(1:1) == '+' .or. token(1:1) == '-') first = 2
    if (first > len(token)) return        ! a sign alone
    do i = first, len(token)
        if (.not. is_digit(token(i:i))) return
    end do
    read(token, *, iostat=ios) wide       ! fails if the digits overflow even 64 bits
    if (ios /= 0) return
    if (wide < -int(huge(value), int64) - 1 .or. wide > int(huge(value), int64)) return
    value = int(wide)
    parse_int = .true.
end function parse_int

! A real number: [sign] digits [. [digits]]  or  [sign] . digits,  then optionally an exponent
! (e, E, d or D)[sign]digits. The syntax is checked here, character by character, because a
! list-directed read would also take "1+5" (= 1e5), "T" or "nan"; then Fortran's read converts it.
! Like C's strtod, values that overflow or underflow the double range are refused.
logical function parse_real(token, value)
    character(len=*), intent(in) :: token
    real(dp), intent(out) :: value
    integer :: i, n, ios, n_mantissa_digits
    logical :: nonzero                    ! does the mantissa have a digit other than 0?

    parse_real = .false.
    value = 0.0_dp
    n = len(token)
    if (n == 0) return
    i = 1
    if (token(i:i) == '+' .or. token(i:i) == '-') i = i + 1
    n_mantissa_digits = 0
    nonzero = .false.
    do while (i <= n)                     ! digits before the point
        if (.not. is_digit(token(i:i))) exit
        n_mantissa_digits = n_mantissa_digits + 1
        if (token(i:i) /= '0') nonzero = .true.
        i = i + 1
    end do
    if (i <= n) then                      ! the point and the digits after it
        if (token(i:i) == '.') then
            i = i + 1
            do while (i <= n)
                if (.not. is_digit(token(i:i))) exit
                n_mantissa_digits = n_mantissa_digits + 1
                if (token(i:i) /= '0') nonzero = .true.
                i = i + 1
            end do
        end if
    end if
    if (n_mantissa_digits == 0) return    ! "", "+", ".", "abc", "nan", ...
    if (i <= n) then                      ! the exponent: a letter, a sign, at least one digit
        if (index('eEdD', token(i:i)) == 0) return
        i = i + 1
        if (i <= n) then
            if (token(i:i) == '+' .or. token(i:i) == '-') i = i + 1
        end if
        if (i > n) return                 ! "1e", "1e+"
        do while (i <= n)
            if (.not. is_digit(token(i:i))) return     ! also "1.0.0", "1e5x"
            i = i + 1
        end do
    end if
    read(token, *, iostat=ios) value
    if (ios /= 0) return
    if (.not. ieee_is_finite(value)) return                  ! overflow (1e400)
    if (nonzero .and. abs(value) < tiny(value)) return       ! underflow (1e-400)
    parse_real = .true.
end function parse_real

! Read the next line and take size(values) integers from it; `what` names them in messages.
subroutine input_ints(in, values, what)
    type(input_file), intent(inout) :: in
    integer, intent(out) :: values(:)
    character(len=*), intent(in) :: what
    character(len=:), allocatable :: line

    call input_line(in, line, what)
    call input_parse_ints(in, line, values, what)
end subroutine input_ints

! Take size(values) integers from the start of `line`, the line read last.
subroutine input_parse_ints(in, line, values, what)
    type(input_file), intent(in) :: in
    character(len=*), intent(in) :: line
    integer, intent(out) :: values(:)
    character(len=*), intent(in) :: what
    character(len=:), allocatable :: token
    integer :: i, pos

    pos = 1
    do i = 1, size(values)
        if (.not. next_token(line, pos, token)) &
            call input_fail(in, 'expected ' // c_d(size(values)) // ' integer(s) (' // what // &
                                '), found ' // c_d(i - 1))
        if (.not. parse_int(token, values(i))) &
            call input_fail(in, 'expected an integer (' // what // "), got '" // token // "'")
    end do
end subroutine input_parse_ints

! Read the next line and take size(values) reals from it; `what` names them in messages.
subroutine input_reals(in, values, what)
    type(input_file), intent(inout) :: in
    real(dp), intent(out) :: values(:)
    character(len=*), intent(in) :: what
    character(len=:), allocatable :: line
    integer :: pos

    call input_line(in, line, what)
    pos = 1
    call input_parse_reals(in, line, pos, values, what)
end subroutine input_reals

! Take size(values) reals from line(pos:), `line` the line read last; pos moves past them.
subroutine input_parse_reals(in, line, pos, values, what)
    type(input_file), intent(in) :: in
    character(len=*), intent(in) :: line
    integer, intent(inout) :: pos
    real(dp), intent(out) :: values(:)
    character(len=*), intent(in) :: what
    character(len=:), allocatable :: token
    integer :: i

    do i = 1, size(values)
        if (.not. next_token(line, pos, token)) &
            call input_fail(in, 'expected ' // c_d(size(values)) // ' real number(s) (' // what // &
                                '), found ' // c_d(i - 1))
        if (.not. parse_real(token, values(i))) &
            call input_fail(in, 'expected a real number (' // what // "), got '" // token // "'")
    end do
end subroutine input_parse_reals

! The next word of line(pos:) (blanks, tabs and commas separate words), pos moved past it:
! .false. if there is none (or it is longer than 127 characters, as in C).
logical function input_next_word(line, pos, word)
    character(len=*), intent(in) :: line
    integer, intent(inout) :: pos
    character(len=:), allocatable, intent(out) :: word

    input_next_word = next_token(line, pos, word)
end function input_next_word

! Stop with a message unless value > 0 (`what` names it); the value is printed like C's "%g".
subroutine input_require_positive(in, value, what)
    type(input_file), intent(in) :: in
    real(dp), intent(in) :: value
    character(len=*), intent(in) :: what

    if (.not. (value > 0.0_dp)) call input_fail(in, what // ' must be positive, got ' // c_g(value, 6))
end subroutine input_require_positive

! Read the next line; its first word must be one of `choices` (blanks at their ends do not count):
! returns its position there (1-based).
function input_choice(in, choices, what) result(choice)
    type(input_file), intent(inout) :: in
    character(len=*), intent(in) :: choices(:)
    character(len=*), intent(in) :: what
    integer :: choice
    character(len=:), allocatable :: line, token, list
    integer :: pos

    call input_line(in, line, what)
    pos = 1
    if (.not. next_token(line, pos, token)) &
        call input_fail(in, 'expected a word (' // what // '), found none')
    do choice = 1, size(choices)
        if (token == trim(choices(choice))) return
    end do
    list = trim(choices(1))                 ! "xmin, xmax, ..." for the message
    do choice = 2, size(choices)
        list = list // ', ' // trim(choices(choice))
    end do
    call input_fail(in, 'expected one of ' // list // ' (' // what // "), got '" // token // "'")
end function input_choice

end module course_input
