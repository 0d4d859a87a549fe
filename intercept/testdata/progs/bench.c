/* bench: N launches of cuLaunchKernel through whatever driver (and
 * interposer) is loaded; prints the mean cost of one launch. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hooks.h"

CUresult cuInit(unsigned int flags);

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    struct timespec a, b;

    cuInit(0);
    cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL); /* warm up lazy init */
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        if (cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
            return 1;
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    printf("launches=%ld ns_per_launch=%.3f\n", n, ns / (double)n);
    return 0;
}
