/* Conformance and hostile input for broadcasts: treecast's own program, run by
 * tests/conformance.rs twice -- built against the C ABI (`topo_bcast`, -DUSE_TOPO) and as a plain
 * MPI program under the LD_PRELOAD interposer (`MPI_Bcast`).
 *
 *   conformance correct   every root, communicators of every shape (world, halves, reversed
 *                         order, a duplicate, one rank), a pool of datatypes (contiguous,
 *                         strided, indexed, a padded struct, a resized type, a zero-size type),
 *                         counts 0 .. 1000: the bytes a rank's datatype covers equal the root's,
 *                         every other byte of the buffer is untouched.
 *   conformance hostile   erroneous calls (communicators return errors): receivers with count 0
 *                         while the root sends data; the root with count 0 while the others
 *                         expect data; then as many correct empty calls as it takes the tag
 *                         sequence to wrap (TREECAST_TAG_UB=32767: 496 calls) and a correct
 *                         broadcast, whose data must be the new data (a message left behind by
 *                         the erroneous call would be received instead).
 *
 * Prints "CHECK OK <what>" per passed part; a failure prints "CHECK FAILED ..." and exits 1.
 * Hostile mode needs treecast's checked route (TREECAST_ROUTE=plan): on the library route
 * erroneous calls behave as they do with MPI_Bcast itself, which may hang.
 */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef USE_TOPO
#include "treecast.h"
#define BCAST topo_bcast
#else
#define BCAST MPI_Bcast
#endif

static int world_rank;

static void fail(const char *what) {
    fprintf(stderr, "CHECK FAILED: %s (world rank %d)\n", what, world_rank);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static unsigned char pattern(unsigned seed, size_t i) {
    return (unsigned char)((seed * 2654435761u + (unsigned)i * 40503u) >> 13);
}

struct padded { char c; double d; };

/* The datatype pool: name, handle. */
#define NTYPES 8
static MPI_Datatype types[NTYPES];
static const char *type_names[NTYPES] = {"int", "double", "contig3short", "vector", "indexed",
                                         "padded-struct", "resized", "zero-size"};

static void make_types(void) {
    types[0] = MPI_INT;
    types[1] = MPI_DOUBLE;
    MPI_Type_contiguous(3, MPI_SHORT, &types[2]);
    MPI_Type_vector(3, 2, 4, MPI_INT, &types[3]);
    int bl[2] = {2, 1}, disp[2] = {0, 5};
    MPI_Type_indexed(2, bl, disp, MPI_FLOAT, &types[4]);
    int sbl[2] = {1, 1};
    MPI_Aint sdisp[2] = {offsetof(struct padded, c), offsetof(struct padded, d)};
    MPI_Datatype st[2] = {MPI_CHAR, MPI_DOUBLE}, tmp;
    MPI_Type_create_struct(2, sbl, sdisp, st, &tmp);
    MPI_Type_create_resized(tmp, 0, sizeof(struct padded), &types[5]);
    MPI_Type_free(&tmp);
    MPI_Type_create_resized(MPI_INT, 0, 12, &types[6]);
    MPI_Type_contiguous(0, MPI_INT, &types[7]);
    for (int i = 2; i < NTYPES; i++) MPI_Type_commit(&types[i]);
}

/* One correct broadcast of `count` elements of type t from `root` on `comm`, checked. */
static void one_correct(MPI_Comm comm, const char *cname, int root, int t, int count, unsigned seed) {
    int me;
    MPI_Comm_rank(comm, &me);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(types[t], &lb, &extent);
    size_t span = count > 0 ? (size_t)extent * (size_t)count : 0;
    size_t guard = 64, len = span + guard;
    unsigned char *buf = malloc(len + 1), *want = malloc(len + 1);
    for (size_t i = 0; i < len; i++) {
        want[i] = pattern(seed, i);
        buf[i] = me == root ? want[i] : (unsigned char)~pattern(seed + 1, i);
    }
    int rc = BCAST(buf, count, types[t], root, comm);
    char what[256];
    snprintf(what, sizeof what, "%s root %d type %s count %d: rc %d", cname, root, type_names[t], count, rc);
    if (rc != MPI_SUCCESS) fail(what);
    /* The bytes the datatype covers, packed, equal the root's; every other byte keeps its
     * old value (the root's buffer never changes). */
    int psize = 0;
    MPI_Pack_size(count, types[t], comm, &psize);
    unsigned char *p1 = malloc((size_t)psize + 1), *p2 = malloc((size_t)psize + 1);
    int pos1 = 0, pos2 = 0;
    MPI_Pack(buf, count, types[t], p1, psize, &pos1, comm);
    MPI_Pack(want, count, types[t], p2, psize, &pos2, comm);
    if (pos1 != pos2 || memcmp(p1, p2, (size_t)pos1) != 0) fail(what);
    /* Mark the covered bytes in a mask by unpacking 0xFF into a zeroed copy. */
    unsigned char *mask = calloc(len + 1, 1), *ones = malloc((size_t)psize + 1);
    memset(ones, 0xFF, (size_t)psize + 1);
    int pos3 = 0;
    MPI_Unpack(ones, psize, &pos3, mask, count, types[t], comm);
    for (size_t i = 0; i < len; i++) {
        unsigned char old = me == root ? want[i] : (unsigned char)~pattern(seed + 1, i);
        if (!mask[i] && buf[i] != old) {
            snprintf(what, sizeof what, "%s root %d type %s count %d: byte %zu outside the datatype changed",
                     cname, root, type_names[t], count, i);
            fail(what);
        }
    }
    free(buf); free(want); free(p1); free(p2); free(mask); free(ones);
}

static void correct(void) {
    int n, me;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm halves, reversed, dup, self;
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &halves);
    MPI_Comm_split(MPI_COMM_WORLD, 0, n - me, &reversed);
    MPI_Comm_dup(halves, &dup);
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    MPI_Comm comms[5] = {MPI_COMM_WORLD, halves, reversed, dup, self};
    const char *names[5] = {"world", "halves", "reversed", "dup-of-halves", "self"};
    const int counts[4] = {0, 1, 3, 1000};
    for (int c = 0; c < 5; c++) {
        int size;
        MPI_Comm_size(comms[c], &size);
        /* The pattern's seed depends only on the case (communicators differ in size between
         * ranks, so a running counter would not agree). */
        for (int root = 0; root < size; root++)
            for (int t = 0; t < NTYPES; t++)
                for (int k = 0; k < 4; k++)
                    one_correct(comms[c], names[c], root, t, counts[k], (unsigned)(((c * 64 + root) * 16 + t) * 8 + k));
    }
    MPI_Comm_free(&halves); MPI_Comm_free(&reversed); MPI_Comm_free(&dup); MPI_Comm_free(&self);
    /* Communicators freed and created again, likely with the same handle: repeated calls take
     * treecast's fast path, which must forget a freed communicator's private duplicate rather
     * than broadcast on it under the new communicator's handle. 50 calls settle any route
     * (a trial takes at most 42: 20 timed calls of each route and an untimed first one). */
    for (int i = 0; i < 8; i++) {
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        for (int k = 0; k < 50; k++) {
            int x = me == 0 ? 1000 * i + k : -1;
            if (BCAST(&x, 1, MPI_INT, 0, d) != MPI_SUCCESS || x != 1000 * i + k)
                fail("a broadcast on a communicator created after another was freed");
        }
        MPI_Comm_free(&d);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) printf("CHECK OK correct broadcasts on %d ranks\n", n);
}

/* An erroneous call whose counts differ between root and receivers: every receiver must get an
 * error (nobody hangs); the root may succeed. */
static void mismatch(MPI_Comm comm, int root, int root_count, int other_count, const char *what) {
    int me;
    MPI_Comm_rank(comm, &me);
    int buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int count = me == root ? root_count : other_count;
    int rc = BCAST(buf, count, MPI_INT, root, comm);
    if (me != root && rc == MPI_SUCCESS) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s (root %d, this rank's count %d)", what, root, count);
        fail(msg);
    }
}

static void hostile(void) {
    int n, me;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (n < 2) {
        if (me == 0) printf("CHECK OK hostile (nothing to do on 1 rank)\n");
        return;
    }
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    for (int root = 0; root < n; root++) {
        mismatch(comm, root, 4, 0, "receivers with count 0 while the root sends 4 ints got success");
        /* Every rank has returned from the erroneous call (the barrier), so whatever it left on
         * the private communicator is still there: the tag sequence now wraps, 496 calls with
         * the tag bound of 32767 (TREECAST_TAG_UB), and a correct broadcast must deliver its
         * own data, not a stale message. (Without the barrier a root running 496 calls ahead
         * before the receivers notice the mismatch -- they look after 1 ms -- could alias with
         * so small a tag bound; see the README.) */
        MPI_Barrier(comm);
        for (int i = 0; i < 600; i++) {
            int none = 0;
            if (BCAST(&none, 0, MPI_INT, root, comm) != MPI_SUCCESS) fail("a correct empty broadcast failed");
        }
        int v[4] = {-1, -1, -1, -1};
        if (me == root) for (int i = 0; i < 4; i++) v[i] = 100 * root + i;
        if (BCAST(v, 4, MPI_INT, root, comm) != MPI_SUCCESS) fail("the correct broadcast after the wrap failed");
        for (int i = 0; i < 4; i++)
            if (v[i] != 100 * root + i) fail("a stale message of the erroneous call was received after the tag wrap");
        mismatch(comm, root, 0, 4, "receivers expecting 4 ints while the root sends none got success");
        MPI_Barrier(comm);
        int w[2] = {0, 0};
        if (me == root) w[0] = w[1] = 7 + root;
        if (BCAST(w, 2, MPI_INT, root, comm) != MPI_SUCCESS || w[0] != 7 + root || w[1] != 7 + root)
            fail("the communicator does not work after an erroneous call");
    }
    MPI_Comm_free(&comm);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) printf("CHECK OK hostile calls on %d ranks\n", n);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    make_types();
    const char *mode = argc > 1 ? argv[1] : "correct";
    if (strcmp(mode, "correct") == 0) correct();
    else if (strcmp(mode, "hostile") == 0) hostile();
    else fail("usage: conformance correct|hostile");
    for (int i = 2; i < NTYPES; i++) MPI_Type_free(&types[i]);
    MPI_Finalize();
    return 0;
}
