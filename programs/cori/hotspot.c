/* hotspot: transient chip temperature by an explicit finite-difference stencil, the
 * algorithm and constants of Rodinia's hotspot (Rodinia 3.1, hotspot_openmp.cpp,
 * single_iteration): each step reads every cell's temperature, its four neighbours'
 * (edges clamp to the cell itself) and its power, writes the new temperature into a
 * second grid, and the grids swap. Temperatures and powers are seeded random values in
 * Rodinia's input ranges (it reads them from files).
 *
 * usage: hotspot ROWS COLS STEPS [SEED]   prints a checksum of the temperatures */
#include <stdio.h>
#include <stdlib.h>
#include "rng.h"

/* Rodinia's chip: 0.5 mm thick, 16 mm wide, silicon constants, 80 C ambient. */
#define T_CHIP 0.0005f
#define CHIP_HEIGHT 0.016f
#define CHIP_WIDTH 0.016f
#define SPEC_HEAT_SI 1.75e6f
#define K_SI 100.0f
#define FACTOR_CHIP 0.5f
#define MAX_PD 3.0e6f
#define PRECISION 0.001f
#define AMB_TEMP 80.0f

static void step(float *result, const float *temp, const float *power, int rows, int cols,
		 float cap_1, float rx_1, float ry_1, float rz_1)
{
	for (int r = 0; r < rows; r++) {
		for (int c = 0; c < cols; c++) {
			size_t at = (size_t)r * cols + c;
			float t = temp[at];
			float n = r > 0 ? temp[at - cols] : t;
			float s = r < rows - 1 ? temp[at + cols] : t;
			float w = c > 0 ? temp[at - 1] : t;
			float e = c < cols - 1 ? temp[at + 1] : t;
			float delta = cap_1 * (power[at] + (s + n - 2.0f * t) * ry_1 +
					       (e + w - 2.0f * t) * rx_1 + (AMB_TEMP - t) * rz_1);
			result[at] = t + delta;
		}
	}
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: hotspot ROWS COLS STEPS [SEED]\n");
		return 2;
	}
	int rows = atoi(argv[1]), cols = atoi(argv[2]), steps = atoi(argv[3]);
	rng_state = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
	if (rows < 1 || cols < 1 || steps < 1) {
		fprintf(stderr, "hotspot: ROWS, COLS and STEPS must be at least 1\n");
		return 2;
	}
	size_t cells = (size_t)rows * cols;
	float *temp = malloc(cells * sizeof(float));
	float *power = malloc(cells * sizeof(float));
	float *result = malloc(cells * sizeof(float));
	if (!temp || !power || !result) {
		fprintf(stderr, "hotspot: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < cells; i++) {
		temp[i] = 323.0f + rng_unit() * 20.0f;
		power[i] = rng_unit() * 0.005f;
	}
	/* Rodinia's compute_tran_temp: the grid's thermal capacitance and resistances, and a
	 * time step that keeps the explicit scheme stable. */
	float grid_h = CHIP_HEIGHT / rows, grid_w = CHIP_WIDTH / cols;
	float cap = FACTOR_CHIP * SPEC_HEAT_SI * T_CHIP * grid_w * grid_h;
	float rx = grid_w / (2.0f * K_SI * T_CHIP * grid_h);
	float ry = grid_h / (2.0f * K_SI * T_CHIP * grid_w);
	float rz = T_CHIP / (K_SI * grid_h * grid_w);
	float max_slope = MAX_PD / (FACTOR_CHIP * T_CHIP * SPEC_HEAT_SI);
	float dt = PRECISION / max_slope;
	for (int s = 0; s < steps; s++) {
		step(result, temp, power, rows, cols, dt / cap, 1.0f / rx, 1.0f / ry, 1.0f / rz);
		float *swap = temp;
		temp = result;
		result = swap;
	}
	double sum = 0.0;
	for (size_t i = 0; i < cells; i++)
		sum += temp[i];
	printf("mean temperature %.4f\n", sum / cells);
	free(temp);
	free(power);
	free(result);
	return 0;
}
