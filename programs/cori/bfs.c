/* bfs: level-synchronous breadth-first search from node 0, the algorithm of Rodinia's bfs
 * (Rodinia 3.1, bfs.cpp): each level passes over all nodes, expands the ones in the
 * frontier mask (their edges, in a shared edge array, set the cost and the "updating"
 * mask of unvisited neighbours), then passes over all nodes again to turn the updating
 * mask into the next frontier. The graph is seeded random: each node gets DEGREE edges
 * to uniformly drawn nodes (Rodinia's inputs, e.g. graph1MW_6, are random graphs with
 * about 6 edges a node).
 *
 * usage: bfs NODES DEGREE [SEED]   prints the levels and a checksum of the costs */
#include <stdio.h>
#include <stdlib.h>
#include "rng.h"

struct node {
	int first; /* index of the node's first edge */
	int edges; /* number of edges */
};

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bfs NODES DEGREE [SEED]\n");
		return 2;
	}
	int n = atoi(argv[1]), degree = atoi(argv[2]);
	rng_state = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
	if (n < 1 || degree < 0) {
		fprintf(stderr, "bfs: NODES must be at least 1, DEGREE at least 0\n");
		return 2;
	}
	size_t m = (size_t)n * degree;
	struct node *nodes = malloc(n * sizeof(struct node));
	int *edges = malloc((m ? m : 1) * sizeof(int));
	char *mask = calloc(n, 1), *updating = calloc(n, 1), *visited = calloc(n, 1);
	int *cost = malloc(n * sizeof(int));
	if (!nodes || !edges || !mask || !updating || !visited || !cost) {
		fprintf(stderr, "bfs: out of memory\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		nodes[i].first = i * degree;
		nodes[i].edges = degree;
		cost[i] = -1;
	}
	for (size_t e = 0; e < m; e++)
		edges[e] = (int)rng_below(n);
	mask[0] = visited[0] = 1;
	cost[0] = 0;

	int levels = 0, more;
	do {
		more = 0;
		for (int v = 0; v < n; v++) {
			if (!mask[v])
				continue;
			mask[v] = 0;
			for (int e = nodes[v].first; e < nodes[v].first + nodes[v].edges; e++) {
				int u = edges[e];
				if (!visited[u]) {
					cost[u] = cost[v] + 1;
					updating[u] = 1;
				}
			}
		}
		for (int v = 0; v < n; v++) {
			if (updating[v]) {
				mask[v] = visited[v] = 1;
				more = 1;
				updating[v] = 0;
			}
		}
		levels++;
	} while (more);

	long sum = 0;
	for (int i = 0; i < n; i++)
		sum += cost[i];
	printf("levels %d costs %ld\n", levels, sum);
	free(nodes);
	free(edges);
	free(mask);
	free(updating);
	free(visited);
	free(cost);
	return 0;
}
