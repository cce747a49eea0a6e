/* lud: LU decomposition in place without pivoting (Doolittle), the algorithm of Rodinia's
 * lud reference version (Rodinia 3.1, lud_base): for each i, row i of U from column i
 * on, then column i of L below the diagonal, each entry an inner product over k < i.
 * The work shrinks and shifts with i: the triangular pattern of the Cori paper's
 * Figure 2. The matrix is seeded random, diagonally dominant so that no pivot is small
 * (Rodinia generates or reads such a matrix).
 *
 * usage: lud N [SEED]   prints a checksum of the factors */
#include <stdio.h>
#include <stdlib.h>
#include "rng.h"

static void lud(float *a, int n)
{
	for (int i = 0; i < n; i++) {
		for (int j = i; j < n; j++) {
			float sum = a[(size_t)i * n + j];
			for (int k = 0; k < i; k++)
				sum -= a[(size_t)i * n + k] * a[(size_t)k * n + j];
			a[(size_t)i * n + j] = sum;
		}
		for (int j = i + 1; j < n; j++) {
			float sum = a[(size_t)j * n + i];
			for (int k = 0; k < i; k++)
				sum -= a[(size_t)j * n + k] * a[(size_t)k * n + i];
			a[(size_t)j * n + i] = sum / a[(size_t)i * n + i];
		}
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: lud N [SEED]\n");
		return 2;
	}
	int n = atoi(argv[1]);
	rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
	if (n < 1) {
		fprintf(stderr, "lud: N must be at least 1\n");
		return 2;
	}
	float *a = malloc((size_t)n * n * sizeof(float));
	if (!a) {
		fprintf(stderr, "lud: out of memory\n");
		return 1;
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			a[(size_t)i * n + j] = rng_unit() + (i == j ? (float)n : 0.0f);
	lud(a, n);
	double sum = 0.0;
	for (size_t i = 0; i < (size_t)n * n; i++)
		sum += a[i];
	printf("checksum %.4f\n", sum);
	free(a);
	return 0;
}
