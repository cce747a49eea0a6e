/* The layout shared by the host (src/abi.rs mirrors every offset) and the guest.
 * All addresses below 1 GiB are identity-mapped in the guest. */
#ifndef TIERSCOPE_ABI_H
#define TIERSCOPE_ABI_H
#include <stdint.h>

#define ABI_MAGIC 0x54535f4b564d3031ull /* "TS_KVM01" */
#define CTRL_ADDR 0x10000ull
#define CODE_ADDR 0x100000ull
#define MAX_VCPUS 64
#define MAX_PATTERNS 16
#define MAX_PHASES 64

#define PORT_EXIT 0x10  /* out: the guest is done (value = reason) */
#define PORT_DEBUG 0x11 /* out: a debug value */

#define KIND_RANDOM 0
#define KIND_SEQUENTIAL 1
#define MODE_RO 0
#define MODE_WO 1
#define MODE_RW 2

#define FLUSH_PAGES 0
#define FLUSH_FULL 1

struct pattern {            /* 48 bytes */
    uint64_t off;           /* region start, as an offset from heap_va */
    uint64_t len;           /* region length in bytes (a multiple of 8) */
    uint64_t stride;        /* sequential stride in bytes */
    uint32_t kind, mode;
    uint64_t cum_weight;    /* weights of patterns [0..=i] */
    uint64_t pad;
};

struct phase {              /* 0x400 bytes */
    uint64_t npat;
    uint64_t total_weight;
    struct pattern pat[MAX_PATTERNS];
    uint8_t pad[0x400 - 16 - MAX_PATTERNS * 48];
};

struct vcpu {               /* 0x200 bytes */
    volatile uint64_t budget;         /* 0x00 host: accesses allowed so far */
    uint8_t pad0[0x38];
    volatile uint64_t done;           /* 0x40 guest: accesses done */
    volatile uint64_t paused;         /* 0x48 guest: 1 while honouring pause */
    volatile uint64_t flush_done_seq; /* 0x50 guest: last flush request served */
    volatile uint64_t state;          /* 0x58 guest: 1 running, 2 exited */
    volatile uint64_t flushes_page;   /* 0x60 guest: invlpg batches run */
    volatile uint64_t flushes_full;   /* 0x68 guest: CR3 reloads run */
    volatile uint64_t phase_seen;     /* 0x70 guest: the phase being run */
    uint8_t pad1[0x08];
    volatile uint64_t per_pat[MAX_PATTERNS]; /* 0x80 guest: accesses per pattern slot */
    uint8_t pad2[0x200 - 0x100];
};

struct ctrl {
    uint64_t magic;        /* 0x000 */
    uint64_t heap_va;      /* 0x008 */
    uint64_t heap_len;     /* 0x010 */
    uint64_t truth_va;     /* 0x018 one byte per block */
    uint64_t block_shift;  /* 0x020 */
    uint64_t count_mode;   /* 0x028 0: flag, 1: saturating u8 count */
    uint64_t written_va;   /* 0x030 one byte per 4 KiB heap page written, 0 = off */
    uint64_t batch;        /* 0x038 accesses per pattern choice */
    uint64_t nphases;      /* 0x040 */
    uint64_t seed;         /* 0x048 */
    uint64_t nvcpus;       /* 0x050 */
    uint8_t pad0[0x80 - 0x58];
    volatile uint64_t phase;       /* 0x080 host command */
    uint8_t pad1[0x38];
    volatile uint64_t stop;        /* 0x0c0 */
    uint8_t pad2[0x38];
    volatile uint64_t pause;       /* 0x100 */
    uint8_t pad3[0x38];
    volatile uint64_t flush_seq;   /* 0x140 */
    volatile uint64_t flush_kind;  /* 0x148 */
    volatile uint64_t flush_start; /* 0x150 */
    volatile uint64_t flush_end;   /* 0x158 */
    uint8_t pad4[0x1000 - 0x160];
    struct vcpu vcpu[MAX_VCPUS];   /* 0x1000 */
    struct phase phases[MAX_PHASES]; /* 0x9000 */
};

_Static_assert(sizeof(struct pattern) == 48, "pattern");
_Static_assert(sizeof(struct phase) == 0x400, "phase");
_Static_assert(sizeof(struct vcpu) == 0x200, "vcpu");
_Static_assert(__builtin_offsetof(struct ctrl, phase) == 0x80, "phase off");
_Static_assert(__builtin_offsetof(struct ctrl, flush_seq) == 0x140, "flush off");
_Static_assert(__builtin_offsetof(struct ctrl, vcpu) == 0x1000, "vcpu off");
_Static_assert(__builtin_offsetof(struct ctrl, phases) == 0x9000, "phases off");
_Static_assert(sizeof(struct ctrl) == 0x19000, "ctrl size");
#endif
