/*
 * A plain MPI program (it knows nothing of treecast) for the LD_PRELOAD interposer: it
 * broadcasts with MPI_Bcast and prints every rank's checksum after every broadcast, so runs with
 * and without LD_PRELOAD=libtreecast_preload.so can be compared line by line. It also checks
 * itself: after each broadcast every rank must hold exactly what the root sent, and the gaps of
 * non-contiguous datatypes must be untouched.
 *
 *   mpicc -O2 mpi-examples/preload_bcast.c -o preload_bcast
 *   mpirun -np 4 ./preload_bcast          # sizes 0 .. 16 MiB, every root, world and split
 *   mpirun -np 4 ./preload_bcast inter    # inter-communicators
 *   mpirun -np 4 ./preload_bcast errors   # error classes seen by a custom error handler
 *   mpirun -np 4 ./preload_bcast fatal    # an error under MPI_ERRORS_ARE_FATAL: the job aborts
 *
 * Broadcasts of each kind go through one function (one call site each), so a profile of the run
 * has predictable per-site counts:
 *   bcast_bytes  MPI_BYTE, sizes 0, 1, 7, 4096, 1 MiB + 3, 16 MiB, every root, on world and split
 *   bcast_typed  per root on world: 1000 MPI_INT, 10 strided vectors (12 doubles each),
 *                one absolute-address struct from MPI_BOTTOM (64 ints)
 * Prints "CHECK OK ..." at the end when every rank verified every broadcast.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

/* Keep a function that calls MPI_Bcast one call site in the binary: not inlined, and not
 * cloned by GCC's interprocedural optimizations (e.g. one specialized copy per constant
 * argument), so a profile's per-site counts are the program's. (It must also not end in a
 * tail call to MPI_Bcast: the site is the call's return address, which a tail call replaces
 * with its caller's.) */
#if defined(__GNUC__) && !defined(__clang__)
#define ONE_SITE __attribute__((noipa))
#else
#define ONE_SITE __attribute__((noinline))
#endif

static int failures = 0;
static int world_rank, world_size;

static const int sizes[] = {0, 1, 7, 4096, (1 << 20) + 3, 16 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static unsigned char pattern(unsigned seed, size_t i) {
    return (unsigned char)((i * 2654435761u + seed * 40503u + (i >> 9)) >> 7);
}

static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The only MPI_Bcast call of MPI_BYTE messages. */
ONE_SITE static void bcast_bytes(void *buf, int n, int root, MPI_Comm comm) {
    if (MPI_Bcast(buf, n, MPI_BYTE, root, comm) != MPI_SUCCESS) failures++;
}

/* The only MPI_Bcast call of typed messages. */
ONE_SITE static void bcast_typed(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    if (MPI_Bcast(buf, count, type, root, comm) != MPI_SUCCESS) failures++;
}

/* Gather every world rank's checksum and print them from world rank 0 (-1: no data). */
static void report(const char *what, uint64_t sum, int has) {
    uint64_t mine[2] = {sum, (uint64_t)has};
    uint64_t *all = world_rank == 0 ? malloc(sizeof mine * world_size) : NULL;
    MPI_Gather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (world_rank == 0) {
        printf("%s:", what);
        for (int r = 0; r < world_size; r++) {
            if (all[2 * r + 1]) printf(" %016llx", (unsigned long long)all[2 * r]);
            else printf(" -");
        }
        printf("\n");
        free(all);
    }
}

static void check_bytes(const char *name, MPI_Comm comm) {
    int rank, size, max_size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Allreduce(&size, &max_size, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    unsigned char *buf = malloc((size_t)sizes[NSIZES - 1] + 1);
    for (int s = 0; s < NSIZES; s++) {
        size_t n = (size_t)sizes[s];
        for (int root = 0; root < max_size; root++) {
            uint64_t sum = 0;
            int has = root < size;
            if (has) {
                unsigned seed = 1000u * (unsigned)root + (unsigned)s;
                unsigned own = rank == root ? seed : 77777u + (unsigned)world_rank;
                for (size_t i = 0; i < n; i++) buf[i] = pattern(own, i);
                buf[n] = 0x5a; /* guard byte past the message */
                bcast_bytes(buf, (int)n, root, comm);
                size_t bad = n;
                for (size_t i = 0; i < n && bad == n; i++)
                    if (buf[i] != pattern(seed, i)) bad = i;
                if (bad != n || buf[n] != 0x5a) {
                    fprintf(stderr, "%s size %zu root %d rank %d: wrong data at byte %zu\n", name, n, root, rank,
                            bad);
                    failures++;
                }
                sum = fnv1a(buf, n + 1);
            }
            char what[96];
            snprintf(what, sizeof what, "%s bytes size=%zu root=%d", name, n, root);
            report(what, sum, has);
        }
    }
    free(buf);
}

/* MPI_INT, a strided vector with gaps, and an absolute-address struct from MPI_BOTTOM. */
static void check_typed(void) {
    enum { NINT = 1000, NVEC = 10, NABS = 64 };
    MPI_Datatype vec, abs_type;
    MPI_Type_vector(4, 3, 5, MPI_DOUBLE, &vec); /* 4 blocks of 3 doubles, stride 5: extent 18 doubles */
    MPI_Type_commit(&vec);
    static int ints[NINT];
    static double dbl[NVEC * 18], want[NVEC * 18];
    static int absbuf[NABS];
    MPI_Aint addr;
    MPI_Get_address(absbuf, &addr);
    int len = NABS;
    MPI_Datatype t = MPI_INT;
    MPI_Type_create_struct(1, &len, &addr, &t, &abs_type);
    MPI_Type_commit(&abs_type);

    for (int root = 0; root < world_size; root++) {
        int me = world_rank == root;
        for (int i = 0; i < NINT; i++) ints[i] = me ? i * 31 + root : -i - world_rank;
        bcast_typed(ints, NINT, MPI_INT, root, MPI_COMM_WORLD);
        for (int i = 0; i < NINT; i++)
            if (ints[i] != i * 31 + root) {
                fprintf(stderr, "int root %d rank %d: wrong element %d\n", root, world_rank, i);
                failures++;
                break;
            }
        char what[64];
        snprintf(what, sizeof what, "world int root=%d", root);
        report(what, fnv1a(ints, sizeof ints), 1);

        for (int i = 0; i < NVEC * 18; i++) {
            double from_root = 0.5 * i + root;
            dbl[i] = me ? from_root : -1.0 - world_rank;
            /* Element i is data if its position within the 18-double extent is in a block. */
            int in_block = (i % 18) % 5 < 3;
            want[i] = in_block || me ? from_root : dbl[i];
        }
        bcast_typed(dbl, NVEC, vec, root, MPI_COMM_WORLD);
        if (memcmp(dbl, want, sizeof dbl) != 0) {
            fprintf(stderr, "strided root %d rank %d: data or gaps differ\n", root, world_rank);
            failures++;
        }
        snprintf(what, sizeof what, "world strided root=%d", root);
        report(what, fnv1a(dbl, sizeof dbl), 1);

        for (int i = 0; i < NABS; i++) absbuf[i] = me ? 5 * i + root : 0;
        bcast_typed(MPI_BOTTOM, 1, abs_type, root, MPI_COMM_WORLD);
        for (int i = 0; i < NABS; i++)
            if (absbuf[i] != 5 * i + root) {
                fprintf(stderr, "MPI_BOTTOM root %d rank %d: wrong element %d\n", root, world_rank, i);
                failures++;
                break;
            }
        snprintf(what, sizeof what, "world bottom root=%d", root);
        report(what, fnv1a(absbuf, sizeof absbuf), 1);
    }
    MPI_Type_free(&vec);
    MPI_Type_free(&abs_type);
}

/* Broadcast across an inter-communicator between the even and the odd world ranks, both ways. */
static void check_inter(void) {
    if (world_size < 2) return;
    int color = world_rank % 2;
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, color, world_rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color == 0 ? 1 : 0, 17, &inter);
    int hrank;
    MPI_Comm_rank(half, &hrank);
    enum { N = 4099 };
    static unsigned char buf[N];
    for (int sender = 0; sender < 2; sender++) {
        int root;
        if (color == sender) root = hrank == 0 ? MPI_ROOT : MPI_PROC_NULL;
        else root = 0;
        for (int i = 0; i < N; i++) buf[i] = root == MPI_ROOT ? pattern(4242u + sender, i) : pattern(9u + world_rank, i);
        MPI_Bcast(buf, N, MPI_BYTE, root, inter);
        if (color != sender) {
            for (int i = 0; i < N; i++)
                if (buf[i] != pattern(4242u + sender, i)) {
                    fprintf(stderr, "inter from group %d rank %d: wrong byte %d\n", sender, world_rank, i);
                    failures++;
                    break;
                }
        }
        char what[64];
        snprintf(what, sizeof what, "inter from group %d", sender);
        report(what, fnv1a(buf, N), 1);
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
}

static int handler_calls = 0, handler_class = MPI_SUCCESS;

static void count_errors(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    handler_calls++;
    MPI_Error_class(*code, &handler_class);
}

/* Erroneous calls on a communicator with a returning error handler: which class MPI_Bcast
 * returns and passes to the handler; then a good broadcast on the same communicator. */
static void check_errors(void) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(count_errors, &eh);
    MPI_Comm_set_errhandler(comm, eh);
    int buf[16] = {0};
    struct {
        const char *what;
        void *buf;
        int count;
        MPI_Datatype type;
        int root;
    } cases[] = {
        {"negative count", buf, -1, MPI_INT, 0},
        {"null datatype", buf, 4, MPI_DATATYPE_NULL, 0},
        {"root out of range", buf, 4, MPI_INT, world_size},
#if !defined(MPICH_VERSION)
        /* MPICH does not check for it: its MPI_Bcast writes through MPI_IN_PLACE and the plain
         * run crashes, so there is no behaviour of the library's to compare with. */
        {"MPI_IN_PLACE", MPI_IN_PLACE, 4, MPI_INT, 0},
#endif
    };
    for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        handler_calls = 0;
        handler_class = MPI_SUCCESS;
        int rc = MPI_Bcast(cases[c].buf, cases[c].count, cases[c].type, cases[c].root, comm);
        int cls;
        MPI_Error_class(rc, &cls);
        char what[128];
        snprintf(what, sizeof what, "errors %s: class %d, handler called %d times with class %d", cases[c].what, cls,
                 handler_calls, handler_class);
        report(what, 0, 1);
        /* The handler must see the error. What MPI_Bcast returns after a user handler returns
         * differs by library (Open MPI: the error code; MPICH: MPI_SUCCESS); the test compares
         * it with the library's own through the printed class. */
        if (handler_calls != 1 || handler_class == MPI_SUCCESS || (rc != MPI_SUCCESS && handler_class != cls))
            failures++;
    }
    for (int i = 0; i < 16; i++) buf[i] = world_rank == 1 % world_size ? 100 + i : -1;
    int rc = MPI_Bcast(buf, 16, MPI_INT, 1 % world_size, comm);
    for (int i = 0; i < 16; i++)
        if (rc != MPI_SUCCESS || buf[i] != 100 + i) {
            fprintf(stderr, "errors: broadcast after the errors failed on rank %d\n", world_rank);
            failures++;
            break;
        }
    report("errors then a good broadcast", fnv1a(buf, sizeof buf), 1);
    MPI_Comm_free(&comm);
    MPI_Errhandler_free(&eh);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    const char *mode = argc > 1 ? argv[1] : "match";
    if (strcmp(mode, "match") == 0) {
        MPI_Comm split;
        MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, -world_rank, &split);
        check_bytes("world", MPI_COMM_WORLD);
        check_bytes("split", split);
        check_typed();
        MPI_Comm_free(&split);
    } else if (strcmp(mode, "inter") == 0) {
        check_inter();
    } else if (strcmp(mode, "errors") == 0) {
        check_errors();
    } else if (strcmp(mode, "fatal") == 0) {
        /* MPI_COMM_WORLD's default handler is MPI_ERRORS_ARE_FATAL: the job must abort here. */
        int buf[4] = {0};
        MPI_Bcast(buf, -1, MPI_INT, 0, MPI_COMM_WORLD);
        printf("CHECK FAILED preload_bcast fatal: MPI_Bcast with a negative count returned\n");
        failures++;
    } else {
        if (world_rank == 0) fprintf(stderr, "unknown mode %s (match, inter, errors, fatal)\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (world_rank == 0) {
        if (total == 0) printf("CHECK OK preload_bcast %s on %d ranks\n", mode, world_size);
        else printf("CHECK FAILED preload_bcast %s: %d failures\n", mode, total);
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
