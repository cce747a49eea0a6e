/* kmeans: Lloyd's k-means clustering, the algorithm of Rodinia's kmeans (Rodinia 3.1,
 * kmeans_clustering.c): each iteration passes over all points, finds each point's nearest
 * centre by Euclidean distance, counts the points whose membership changed, accumulates
 * the new centres, and replaces the centres by the means; it stops when no point changes
 * (Rodinia: changes <= threshold 0.001) or after ITERS iterations (Rodinia: 500). The
 * first K points are the initial centres, as in Rodinia. Points are seeded Gaussian-ish
 * blobs around K random centres (Rodinia reads them from a file, e.g. kdd_cup's 34
 * features).
 *
 * usage: kmeans POINTS FEATURES K ITERS [SEED]   prints the iterations and a checksum */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include "rng.h"

static int nearest(const float *pt, const float *centres, int k, int f)
{
	int best = 0;
	float best_d = FLT_MAX;
	for (int c = 0; c < k; c++) {
		float d = 0.0f;
		for (int j = 0; j < f; j++) {
			float x = pt[j] - centres[c * f + j];
			d += x * x;
		}
		if (d < best_d) {
			best_d = d;
			best = c;
		}
	}
	return best;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: kmeans POINTS FEATURES K ITERS [SEED]\n");
		return 2;
	}
	int n = atoi(argv[1]), f = atoi(argv[2]), k = atoi(argv[3]), iters = atoi(argv[4]);
	rng_state = argc > 5 ? strtoull(argv[5], NULL, 10) : 1;
	if (n < 1 || f < 1 || k < 1 || k > n || iters < 1) {
		fprintf(stderr, "kmeans: need POINTS >= K >= 1, FEATURES >= 1, ITERS >= 1\n");
		return 2;
	}
	float *points = malloc((size_t)n * f * sizeof(float));
	float *centres = malloc((size_t)k * f * sizeof(float));
	float *sums = calloc((size_t)k * f, sizeof(float));
	int *counts = calloc(k, sizeof(int));
	int *member = malloc(n * sizeof(int));
	float *blob = malloc((size_t)k * f * sizeof(float));
	if (!points || !centres || !sums || !counts || !member || !blob) {
		fprintf(stderr, "kmeans: out of memory\n");
		return 1;
	}
	for (int i = 0; i < k * f; i++)
		blob[i] = rng_unit() * 10.0f;
	for (int i = 0; i < n; i++) {
		int b = rng_below(k);
		for (int j = 0; j < f; j++) /* a sum of three uniforms: roughly normal */
			points[(size_t)i * f + j] =
				blob[b * f + j] + rng_unit() + rng_unit() + rng_unit() - 1.5f;
		member[i] = -1;
	}
	for (int i = 0; i < k * f; i++)
		centres[i] = points[i];

	int loop = 0, changed;
	do {
		changed = 0;
		for (int i = 0; i < n; i++) {
			const float *pt = points + (size_t)i * f;
			int c = nearest(pt, centres, k, f);
			changed += member[i] != c;
			member[i] = c;
			counts[c]++;
			for (int j = 0; j < f; j++)
				sums[c * f + j] += pt[j];
		}
		for (int c = 0; c < k; c++) {
			for (int j = 0; j < f; j++) {
				if (counts[c] > 0)
					centres[c * f + j] = sums[c * f + j] / counts[c];
				sums[c * f + j] = 0.0f;
			}
			counts[c] = 0;
		}
	} while (changed > 0 && ++loop < iters);

	double sum = 0.0;
	for (int i = 0; i < k * f; i++)
		sum += centres[i];
	printf("iterations %d centres %.4f\n", loop + (changed == 0), sum);
	free(points);
	free(centres);
	free(sums);
	free(counts);
	free(member);
	free(blob);
	return 0;
}
