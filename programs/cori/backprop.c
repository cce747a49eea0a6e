/* backprop: one training step of a three-layer perceptron, the algorithm of Rodinia's
 * backprop (Rodinia 3.1, bpnn_train_kernel): N input units, 16 hidden units, one output,
 * weights stored one row per input unit ((N + 1) x 17 floats, unit 0 the bias), so every
 * pass over a hidden unit's weights strides across all rows. The forward pass makes 16
 * such strides over the weights; adjusting the weights makes 16 more over the weights
 * and the previous changes (momentum). Inputs and weights are seeded random numbers
 * (Rodinia draws them with rand() too).
 *
 * usage: backprop N [SEED]   prints the output unit and a checksum of the weights */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "rng.h"

#define HIDDEN 16
#define ETA 0.3f
#define MOMENTUM 0.3f

static float squash(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

/* l2[j] = squash(sum_k w[k][j] * l1[k]) for j = 1..n2: for each j a stride over w. */
static void layer_forward(const float *l1, float *l2, const float *w, int n1, int n2)
{
	for (int j = 1; j <= n2; j++) {
		float sum = 0.0f;
		for (int k = 0; k <= n1; k++)
			sum += w[(size_t)k * (n2 + 1) + j] * l1[k];
		l2[j] = squash(sum);
	}
}

/* w[k][j] += eta * delta[j] * ly[k] + momentum * oldw[k][j], for each j a stride over
 * w and oldw. */
static void adjust_weights(const float *delta, int ndelta, const float *ly, int nly,
			   float *w, float *oldw)
{
	for (int j = 1; j <= ndelta; j++) {
		for (int k = 0; k <= nly; k++) {
			size_t at = (size_t)k * (ndelta + 1) + j;
			float dw = ETA * delta[j] * ly[k] + MOMENTUM * oldw[at];
			w[at] += dw;
			oldw[at] = dw;
		}
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: backprop N [SEED]\n");
		return 2;
	}
	int n = atoi(argv[1]);
	rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
	if (n < 1) {
		fprintf(stderr, "backprop: N must be at least 1\n");
		return 2;
	}
	size_t rows = (size_t)n + 1;
	float *input = malloc(rows * sizeof(float));
	float hidden[HIDDEN + 1], output[2], delta_h[HIDDEN + 1], delta_o[2];
	float *w_in = malloc(rows * (HIDDEN + 1) * sizeof(float));
	float *dw_in = calloc(rows * (HIDDEN + 1), sizeof(float));
	float w_out[(HIDDEN + 1) * 2], dw_out[(HIDDEN + 1) * 2] = {0};
	if (!input || !w_in || !dw_in) {
		fprintf(stderr, "backprop: out of memory\n");
		return 1;
	}
	input[0] = hidden[0] = 1.0f; /* the bias units */
	for (size_t k = 1; k < rows; k++)
		input[k] = rng_unit();
	for (size_t i = 0; i < rows * (HIDDEN + 1); i++)
		w_in[i] = rng_unit() * 2.0f - 1.0f;
	for (int i = 0; i < (HIDDEN + 1) * 2; i++)
		w_out[i] = rng_unit() * 2.0f - 1.0f;
	float target = 0.1f;

	layer_forward(input, hidden, w_in, n, HIDDEN);
	layer_forward(hidden, output, w_out, HIDDEN, 1);
	delta_o[1] = output[1] * (1.0f - output[1]) * (target - output[1]);
	for (int j = 1; j <= HIDDEN; j++) {
		float h = hidden[j];
		delta_h[j] = h * (1.0f - h) * w_out[j * 2 + 1] * delta_o[1];
	}
	adjust_weights(delta_o, 1, hidden, HIDDEN, w_out, dw_out);
	adjust_weights(delta_h, HIDDEN, input, n, w_in, dw_in);

	double sum = 0.0;
	for (size_t i = 0; i < rows * (HIDDEN + 1); i += 97)
		sum += w_in[i];
	printf("output %.6f weights %.6f\n", output[1], sum);
	free(input);
	free(w_in);
	free(dw_in);
	return 0;
}
