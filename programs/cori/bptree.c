/* bptree: point lookups in a B+ tree, the algorithm of Rodinia's b+tree query kernel
 * (Rodinia 3.1, b+tree, kernel_cpu's findK): the tree is an array of fixed-size nodes,
 * root first and each level after the one above (Rodinia copies its tree into such an
 * array, its `knode`s: ORDER + 1 keys and child or record indices each); a lookup walks
 * from the root, at each level scanning all of the node's key slots for the one whose
 * range holds the key, then scans the leaf for the key and reads its record. Keys are
 * 0, 3, 6, ... (Rodinia reads them from a file, e.g. mil.txt's million), the tree is
 * bulk-loaded full (Rodinia inserts them one by one), and the lookups are seeded random
 * keys of the tree (Rodinia's command file: `k COUNT`, random keys).
 *
 * usage: bptree KEYS LOOKUPS [SEED]   prints the height, a checksum of the records found
 * and how many lookups found nothing (0: every key is in the tree) */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include "rng.h"

#define ORDER 256 /* Rodinia's DEFAULT_ORDER in its kernels */

struct knode {
	int indices[ORDER + 1]; /* children (inner) or records (leaf) */
	int keys[ORDER + 1];	/* keys[i] starts child i's range; unused slots INT_MAX */
	int is_leaf;
	int num_keys;
};

/* Bulk-loads `n` sorted keys: returns the node array (root at 0) and sets its height. */
static struct knode *build(const int *keys, int n, int *height, int *nodes_out)
{
	int level_nodes[32], levels = 0, total = 0;
	for (int w = (n + ORDER - 1) / ORDER;; w = (w + ORDER - 1) / ORDER) {
		level_nodes[levels++] = w;
		total += w;
		if (w == 1)
			break;
	}
	struct knode *nodes = malloc((size_t)total * sizeof(struct knode));
	if (!nodes)
		return NULL;
	/* Levels from the root (levels - 1) down to the leaves (0); `first[l]` is where
	 * level l starts in the array. */
	int first[32], at = 0;
	for (int l = levels - 1; l >= 0; l--) {
		first[l] = at;
		at += level_nodes[l];
	}
	for (int l = 0; l < levels; l++) {
		int below = l == 0 ? n : level_nodes[l - 1];
		for (int b = 0; b < level_nodes[l]; b++) {
			struct knode *k = &nodes[first[l] + b];
			k->is_leaf = l == 0;
			k->num_keys = 0;
			for (int i = 0; i <= ORDER; i++) {
				int child = b * ORDER + i;
				if (i < ORDER && child < below) {
					/* A leaf slot holds a key and its record; an inner slot
					 * the smallest key under its child. */
					k->indices[i] = l == 0 ? child : first[l - 1] + child;
					k->keys[i] = l == 0 ? keys[child]
							    : nodes[first[l - 1] + child].keys[0];
					k->num_keys++;
				} else {
					k->indices[i] = 0;
					k->keys[i] = INT_MAX;
				}
			}
		}
	}
	*height = levels;
	*nodes_out = total;
	return nodes;
}

/* Rodinia's findK for one key: every slot of each inner node is compared. */
static int find(const struct knode *nodes, int height, const int *records, int key)
{
	int curr = 0;
	for (int level = 1; level < height; level++) {
		int next = curr;
		for (int t = 0; t < ORDER; t++)
			if (nodes[curr].keys[t] <= key && nodes[curr].keys[t + 1] > key)
				next = nodes[curr].indices[t];
		curr = next;
	}
	int answer = -1;
	for (int t = 0; t < ORDER; t++)
		if (nodes[curr].keys[t] == key)
			answer = records[nodes[curr].indices[t]];
	return answer;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bptree KEYS LOOKUPS [SEED]\n");
		return 2;
	}
	int n = atoi(argv[1]), lookups = atoi(argv[2]);
	rng_state = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
	if (n < 1 || n > INT_MAX / 3 || lookups < 0) {
		fprintf(stderr, "bptree: KEYS must be 1 to %d, LOOKUPS at least 0\n", INT_MAX / 3);
		return 2;
	}
	int *keys = malloc((size_t)n * sizeof(int));
	int *records = malloc((size_t)n * sizeof(int));
	if (!keys || !records) {
		fprintf(stderr, "bptree: out of memory\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		keys[i] = 3 * i;
		records[i] = (int)rng_below(1000);
	}
	int height, count;
	struct knode *nodes = build(keys, n, &height, &count);
	if (!nodes) {
		fprintf(stderr, "bptree: out of memory\n");
		return 1;
	}
	long sum = 0;
	int missing = 0;
	for (int q = 0; q < lookups; q++) {
		int r = find(nodes, height, records, keys[rng_below(n)]);
		missing += r < 0;
		sum += r;
	}
	printf("height %d nodes %d records %ld missing %d\n", height, count, sum, missing);
	free(nodes);
	free(keys);
	free(records);
	return 0;
}
