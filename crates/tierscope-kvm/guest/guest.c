/* tierscope's KVM guest: a freestanding MASIM-style workload. The host enters it in long
 * mode at _start with rdi = vCPU index and rsp = the top of that vCPU's stack. It reads its
 * phases and patterns from the control page (abi.h), and talks to the host only through
 * that shared memory and port I/O. */
#include "abi.h"

#define CHUNK 1024

static struct ctrl *const C = (struct ctrl *)CTRL_ADDR;

void gmain(uint64_t id);

/* The guest runs in user mode (CPL 3) with IOPL 3 (so `out` works): under a shadow-paging
 * hypervisor like PVM only user mode runs natively, supervisor mode is emulated instruction
 * by instruction (about 1 us each). On the PVM variant of the project's hosts a SYSCALL to
 * a supervisor routine triple-faults (no PVM event entry can be configured), so the guest
 * cannot run INVLPG or reload CR3: it acknowledges flush requests and counts them, and the
 * host documents that flushes are not executed (docs/models/KVM.md). */
__asm__(".section .text.start\n"
        ".global _start\n"
        "_start:\n"
        "  call gmain\n"
        "1: pause\n"
        "  jmp 1b\n"
        ".text\n");

static inline void outl(uint16_t port, uint32_t v) {
    __asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port) : "memory");
}

static inline void cpu_relax(void) { __asm__ volatile("pause" ::: "memory"); }
static inline void barrier(void) { __asm__ volatile("" ::: "memory"); }


/* xorshift64* */
static inline uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* A uniform integer in [0, n) without a division. */
static inline uint64_t below(uint64_t r, uint64_t n) {
    return (uint64_t)(((unsigned __int128)r * n) >> 64);
}

static void serve_flush(struct vcpu *v) {
    uint64_t seq = C->flush_seq;
    if (seq == v->flush_done_seq)
        return;
    barrier();
    uint64_t kind = C->flush_kind, s = C->flush_start, e = C->flush_end;
    barrier();
    uint64_t seq2 = C->flush_seq;
    if (seq2 != seq || seq != v->flush_done_seq + 1 || kind == FLUSH_FULL ||
        e - s > (64ull << 12)) {
        v->flushes_full = v->flushes_full + 1;
    } else {
        (void)s;
        v->flushes_page = v->flushes_page + 1;
    }
    v->flush_done_seq = seq2;
}

/* Everything the host may ask between chunks. Returns 1 when the guest must stop. */
static int service(struct vcpu *v) {
    serve_flush(v);
    if (C->pause) {
        v->paused = 1;
        while (C->pause && !C->stop) {
            serve_flush(v);
            cpu_relax();
        }
        v->paused = 0;
    }
    return C->stop != 0;
}

struct cursor {
    uint64_t seq[MAX_PATTERNS]; /* sequential offsets, per pattern slot */
    uint64_t phase;
};

void gmain(uint64_t id) {
    struct vcpu *v = &C->vcpu[id];
    uint64_t rng = C->seed ^ ((id + 1) * 0x9E3779B97F4A7C15ull);
    if (rng == 0)
        rng = 1;
    uint8_t *const heap = (uint8_t *)C->heap_va;
    uint8_t *const truth = (uint8_t *)C->truth_va;
    uint8_t *const written = (uint8_t *)C->written_va;
    const uint64_t bs = C->block_shift;
    const int counting = C->count_mode != 0;
    const uint64_t batch = C->batch ? C->batch : 131072;
    struct cursor cur;
    for (int i = 0; i < MAX_PATTERNS; i++)
        cur.seq[i] = 0;
    cur.phase = ~0ull;
    uint64_t sink = 0, done = v->done;
    v->state = 1;

    for (;;) {
        if (service(v))
            break;
        uint64_t ph_idx = C->phase;
        if (ph_idx >= C->nphases)
            ph_idx = 0;
        if (ph_idx != cur.phase) {
            for (int i = 0; i < MAX_PATTERNS; i++)
                cur.seq[i] = 0;
            cur.phase = ph_idx;
            v->phase_seen = ph_idx;
        }
        const struct phase *ph = &C->phases[ph_idx];
        uint64_t pick = below(rng_next(&rng), ph->total_weight);
        uint64_t p = 0;
        while (p + 1 < ph->npat && pick >= ph->pat[p].cum_weight)
            p++;
        const struct pattern *pt = &ph->pat[p];
        const uint64_t words = pt->len >> 3;
        uint8_t *const base = heap + pt->off;
        uint64_t left = batch;
        int stop = 0;
        while (left > 0) {
            uint64_t n = left < CHUNK ? left : CHUNK;
            while (done + n > v->budget) {
                if (service(v) || C->phase != ph_idx) {
                    stop = 1;
                    break;
                }
                cpu_relax();
            }
            if (stop)
                break;
            uint64_t s = cur.seq[p];
            for (uint64_t i = 0; i < n; i++) {
                uint64_t off;
                if (pt->kind == KIND_RANDOM) {
                    off = below(rng_next(&rng), words) << 3;
                } else {
                    off = s;
                    s += pt->stride;
                    if (s >= pt->len)
                        s -= pt->len;
                    if (s >= pt->len)
                        s = 0;
                }
                volatile uint64_t *a = (volatile uint64_t *)(base + off);
                int write = pt->mode == MODE_WO || (pt->mode == MODE_RW && (i & 1));
                if (write) {
                    *a = done + i;
                    if (written)
                        written[(pt->off + off) >> 12] = 1;
                } else {
                    sink += *a;
                }
                uint64_t b = (pt->off + off) >> bs;
                if (counting) {
                    uint8_t c = truth[b];
                    if (c != 255)
                        truth[b] = c + 1;
                } else {
                    truth[b] = 1;
                }
            }
            cur.seq[p] = s;
            done += n;
            v->done = done;
            v->per_pat[p] = v->per_pat[p] + n;
            left -= n;
            if (C->flush_seq != v->flush_done_seq || C->pause || C->stop ||
                C->phase != ph_idx)
                break;
        }
    }
    if (sink == 0x5a5a5a5a5a5a5a5aull)
        outl(PORT_DEBUG, (uint32_t)sink);
    v->state = 2;
    outl(PORT_EXIT, 0);
}
