/* The number of threads of the next parallel regions, settable from Python (ctypes): OpenMP reads
 * OMP_NUM_THREADS once, when the library loads. */
#include <omp.h>
#include "course.h"

/* [course_set_threads] */
void course_set_threads(int n)
{
    omp_set_num_threads(n);
}
/* [course_set_threads] */
