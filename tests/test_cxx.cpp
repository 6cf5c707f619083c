// test_cxx - the C++ operator new/delete family on HAKMEM (run under LD_PRELOAD).
//
// new/delete, new[]/delete[], sized delete, aligned new (alignas(64),
// alignas(4096), std::align_val_t{1 << 20}), nothrow new, bad_alloc for a huge
// size, std::set_new_handler called before bad_alloc, and std::vector /
// std::string / std::map churn (also from several threads) with checks.
#include "hak_test.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <malloc.h>

static unsigned long g_checks;
#define C(cond, ...) do { g_checks++; CHECK(cond, __VA_ARGS__); } while (0)

template <class T> static T *escape(T *p)
{
    __asm__ volatile("" : "+r"(p)::"memory");
    return p;
}

static void check_ours(const void *p, const char *what)
{
    if (hak_test_owns)
        C(hak_test_owns(p), "%s = %p is not owned by HAKMEM: operator is not interposed", what, p);
}

struct Obj {
    uint64_t a, b, c;
    explicit Obj(uint64_t x) : a(x), b(~x), c(x * 3) {}
    bool ok(uint64_t x) const { return a == x && b == ~x && c == x * 3; }
};

struct alignas(64) A64 {
    unsigned char d[100];
};
struct alignas(4096) A4096 {
    unsigned char d[5000];
};
struct alignas(1 << 20) A1M {
    unsigned char d[64];
};

static void test_plain_new_delete()
{
    std::vector<Obj *> v;
    for (uint64_t i = 0; i < 5000; i++) {
        Obj *o = escape(new Obj(i));
        C(ht_aligned(o, alignof(std::max_align_t)), "new Obj = %p misaligned", (void *)o);
        if (i < 8)
            check_ours(o, "new Obj");
        v.push_back(o);
    }
    for (uint64_t i = 0; i < v.size(); i++) {
        C(v[i]->ok(i), "object %lu overwritten", (unsigned long)i);
        delete v[i]; // sized delete (C++14 -fsized-deallocation)
    }
    // arrays of every small length
    for (size_t n = 0; n < 3000; n += (n < 300 ? 1 : 37)) {
        uint32_t *a = escape(new uint32_t[n]);
        C(ht_aligned(a, alignof(std::max_align_t)), "new uint32_t[%zu] = %p misaligned", n, (void *)a);
        for (size_t j = 0; j < n; j++)
            a[j] = (uint32_t)(j * 2654435761u);
        for (size_t j = 0; j < n; j++)
            C(a[j] == (uint32_t)(j * 2654435761u), "new[] array element %zu lost", j);
        delete[] a;
    }
    // arrays with a cookie (non-trivial destructor)
    std::string *s = escape(new std::string[17]);
    for (int i = 0; i < 17; i++)
        s[i] = std::string(static_cast<size_t>(i * 10), (char)('a' + i));
    for (int i = 0; i < 17; i++)
        C(s[i].size() == static_cast<size_t>(i * 10), "string[%d] wrong size", i);
    delete[] s;
    // direct calls to every plain form
    void *p = escape(::operator new(100));
    check_ours(p, "operator new(100)");
    memset(p, 1, 100);
    ::operator delete(p);
    p = escape(::operator new(100));
    ::operator delete(p, 100); // sized
    p = escape(::operator new[](300));
    check_ours(p, "operator new[](300)");
    memset(p, 2, 300);
    ::operator delete[](p);
    p = escape(::operator new[](300));
    ::operator delete[](p, 300); // sized
    p = escape(::operator new(0));
    C(p != nullptr, "operator new(0) returned nullptr");
    void *q = escape(::operator new(0));
    C(p != q, "two operator new(0) calls returned the same pointer %p", p);
    ::operator delete(p);
    ::operator delete(q);
    p = escape(::operator new(100, std::nothrow));
    C(p, "operator new(100, nothrow) returned nullptr");
    check_ours(p, "operator new(100, nothrow)");
    ::operator delete(p, std::nothrow);
    p = escape(::operator new[](100, std::nothrow));
    C(p, "operator new[](100, nothrow) returned nullptr");
    ::operator delete[](p, std::nothrow);
    // big ones
    for (size_t n : { (size_t)70000, (size_t)1 << 20, (size_t)5 << 20, (size_t)33 << 20 }) {
        unsigned char *b = escape(new unsigned char[n]);
        check_ours(b, "new unsigned char[big]");
        b[0] = 1;
        b[n - 1] = 2;
        C(b[0] == 1 && b[n - 1] == 2, "big new[] block broken");
        delete[] b;
    }
}

static void test_aligned_new()
{
    std::vector<A64 *> v64;
    for (int i = 0; i < 500; i++) {
        A64 *a = escape(new A64);
        C(ht_aligned(a, 64), "new alignas(64) object = %p misaligned", (void *)a);
        if (i == 0)
            check_ours(a, "new alignas(64)");
        memset(a->d, i & 0xff, sizeof a->d);
        v64.push_back(a);
    }
    for (int i = 0; i < 500; i++) {
        for (size_t j = 0; j < sizeof v64[i]->d; j++)
            C(v64[i]->d[j] == (unsigned char)(i & 0xff), "alignas(64) object %d overwritten", i);
        delete v64[i];
    }
    for (int n = 1; n < 40; n += 3) {
        A64 *arr = escape(new A64[n]);
        C(ht_aligned(arr, 64), "new alignas(64)[%d] = %p misaligned", n, (void *)arr);
        memset(arr, 0x11, sizeof(A64) * n);
        delete[] arr;
    }
    for (int i = 0; i < 40; i++) {
        A4096 *a = escape(new A4096);
        C(ht_aligned(a, 4096), "new alignas(4096) object = %p misaligned", (void *)a);
        memset(a->d, 0x22, sizeof a->d);
        delete a;
        A4096 *arr = escape(new A4096[3]);
        C(ht_aligned(arr, 4096), "new alignas(4096)[3] = %p misaligned", (void *)arr);
        memset(arr, 0x33, sizeof(A4096) * 3);
        delete[] arr;
    }
    A1M *m = escape(new A1M);
    C(ht_aligned(m, 1 << 20), "new alignas(1 MiB) object = %p misaligned", (void *)m);
    delete m;
    // every aligned form, called directly, for alignments up to 1 MiB
    for (size_t al = 1; al <= ((size_t)1 << 20); al <<= 1) {
        std::align_val_t a{al};
        for (size_t n : { (size_t)0, (size_t)1, (size_t)100, (size_t)4096, (size_t)100000 }) {
            void *p = escape(::operator new(n, a));
            C(p && ht_aligned(p, al), "operator new(%zu, align %zu) = %p", n, al, p);
            check_ours(p, "aligned operator new");
            memset(p, 0x44, n);
            if (n & 1)
                ::operator delete(p, a);
            else
                ::operator delete(p, n, a); // sized aligned
            p = escape(::operator new[](n, a));
            C(p && ht_aligned(p, al), "operator new[](%zu, align %zu) = %p", n, al, p);
            memset(p, 0x45, n);
            if (n & 1)
                ::operator delete[](p, a);
            else
                ::operator delete[](p, n, a);
            p = escape(::operator new(n, a, std::nothrow));
            C(p && ht_aligned(p, al), "operator new(%zu, align %zu, nothrow) = %p", n, al, p);
            memset(p, 0x46, n);
            ::operator delete(p, a, std::nothrow);
            p = escape(::operator new[](n, a, std::nothrow));
            C(p && ht_aligned(p, al), "operator new[](%zu, align %zu, nothrow) = %p", n, al, p);
            ::operator delete[](p, a, std::nothrow);
        }
    }
    void *p = escape(::operator new(100, std::align_val_t{1 << 20}));
    C(ht_aligned(p, 1 << 20), "operator new(100, align_val_t{1<<20}) = %p misaligned", p);
    memset(p, 0x55, 100);
    ::operator delete(p, std::align_val_t{1 << 20});
}

static int g_handler_calls;
static void handler_then_give_up()
{
    g_handler_calls++;
    std::set_new_handler(nullptr); // next failure throws
}
static int g_freeing_handler_calls;
static void *g_reserve;
static void freeing_handler()
{
    // the classic pattern: release a reserve and let operator new retry
    g_freeing_handler_calls++;
    if (g_reserve) {
        free(g_reserve);
        g_reserve = nullptr;
    } else {
        std::set_new_handler(nullptr);
    }
}

static void test_failure()
{
    const size_t huge = ht_hide(SIZE_MAX / 2);
    const size_t huger = ht_hide(SIZE_MAX - 4096);
    // nothrow forms return nullptr
    C(::operator new(huge, std::nothrow) == nullptr, "operator new(huge, nothrow) did not return nullptr");
    C(::operator new[](huger, std::nothrow) == nullptr, "operator new[](huge, nothrow) did not return nullptr");
    C(::operator new(huge, std::align_val_t{64}, std::nothrow) == nullptr,
      "operator new(huge, align 64, nothrow) did not return nullptr");
    C(::operator new[](huge, std::align_val_t{4096}, std::nothrow) == nullptr,
      "operator new[](huge, align 4096, nothrow) did not return nullptr");
    char *na = new (std::nothrow) char[huge];
    C(na == nullptr, "new (nothrow) char[huge] did not return nullptr");

    // plain forms throw std::bad_alloc
    int thrown = 0;
    try {
        void *p = escape(::operator new(huge));
        ::operator delete(p);
    } catch (const std::bad_alloc &) {
        thrown++;
    }
    try {
        void *p = escape(::operator new[](huger));
        ::operator delete[](p);
    } catch (const std::bad_alloc &) {
        thrown++;
    }
    try {
        void *p = escape(::operator new(huge, std::align_val_t{1 << 20}));
        ::operator delete(p, std::align_val_t{1 << 20});
    } catch (const std::bad_alloc &) {
        thrown++;
    }
    try {
        std::vector<char> v;
        v.reserve(huge);
        C(false, "vector::reserve(huge) succeeded");
    } catch (const std::bad_alloc &) {
        thrown++;
    } catch (const std::length_error &) {
        thrown++; // libstdc++ checks max_size() first; that is fine too
    }
    C(thrown == 4, "only %d of 4 huge operator new calls threw", thrown);

    // the new handler is called before bad_alloc is thrown
    g_handler_calls = 0;
    std::set_new_handler(handler_then_give_up);
    bool caught = false;
    try {
        void *p = escape(::operator new(huge));
        ::operator delete(p);
    } catch (const std::bad_alloc &) {
        caught = true;
    }
    C(caught, "operator new(huge) with a new handler did not throw bad_alloc");
    C(g_handler_calls == 1, "the new handler was called %d times, expected once before bad_alloc",
      g_handler_calls);
    // aligned new consults the handler too
    g_handler_calls = 0;
    std::set_new_handler(handler_then_give_up);
    caught = false;
    try {
        void *p = escape(::operator new(huge, std::align_val_t{256}));
        ::operator delete(p, std::align_val_t{256});
    } catch (const std::bad_alloc &) {
        caught = true;
    }
    C(caught && g_handler_calls == 1, "aligned operator new(huge): handler calls %d, bad_alloc %s",
      g_handler_calls, caught ? "thrown" : "not thrown");
    // nothrow new also calls the handler, then returns nullptr
    g_handler_calls = 0;
    std::set_new_handler(handler_then_give_up);
    void *p = ::operator new(huge, std::nothrow);
    C(p == nullptr && g_handler_calls == 1, "operator new(huge, nothrow): result %p, handler calls %d",
      p, g_handler_calls);
    // a handler that frees memory and lets the retry go on is called again
    // until it gives up (here: the allocation can never succeed)
    g_reserve = malloc(1000);
    g_freeing_handler_calls = 0;
    std::set_new_handler(freeing_handler);
    caught = false;
    try {
        p = escape(::operator new(huge));
        ::operator delete(p);
    } catch (const std::bad_alloc &) {
        caught = true;
    }
    C(caught && g_freeing_handler_calls == 2 && g_reserve == nullptr,
      "retrying new handler: caught %d, calls %d (expected 2)", caught, g_freeing_handler_calls);
    std::set_new_handler(nullptr);

    // everything still works
    std::string s(1000, 'x');
    C(s.size() == 1000 && s[999] == 'x', "string after failures");
}

static uint64_t churn(unsigned seed, int rounds)
{
    ht_rng r{seed};
    std::map<int, std::string> m;
    std::unordered_map<uint64_t, std::vector<int>> um;
    std::set<std::string> strs;
    uint64_t digest = 0;
    for (int round = 0; round < rounds; round++) {
        std::vector<uint64_t> v;
        size_t n = ht_below(&r, 5000);
        for (size_t i = 0; i < n; i++)
            v.push_back(ht_next(&r) % 1000003);
        std::vector<uint64_t> w(v);
        std::sort(w.begin(), w.end());
        for (size_t i = 1; i < w.size(); i++)
            C(w[i - 1] <= w[i], "sort broken");
        for (size_t i = 0; i < 200; i++) {
            int k = (int)ht_below(&r, 1000);
            std::string val = std::to_string(k) + std::string(ht_below(&r, 300), (char)('a' + k % 26));
            m[k] = val;
            um[(uint64_t)k].push_back(k);
            if (um[(uint64_t)k].size() > 50)
                um.erase((uint64_t)k);
            strs.insert(val.substr(0, ht_below(&r, 40)));
        }
        for (int i = 0; i < 100; i++)
            m.erase((int)ht_below(&r, 1000));
        for (auto &kv : m) {
            std::string prefix = std::to_string(kv.first);
            C(kv.second.compare(0, prefix.size(), prefix) == 0, "map value corrupted: key %d", kv.first);
            for (size_t j = prefix.size(); j < kv.second.size(); j++)
                C(kv.second[j] == (char)('a' + kv.first % 26), "map string corrupted: key %d", kv.first);
        }
        for (auto &kv : um)
            for (int x : kv.second)
                C((uint64_t)x == kv.first, "unordered_map vector corrupted");
        std::string big;
        for (int i = 0; i < 1000; i++)
            big += std::to_string(i);
        C(big.size() == 2890, "string append: size %zu", big.size());
        digest = digest * 31 + m.size() + um.size() + strs.size() + w.size();
        if (strs.size() > 5000)
            strs.clear();
    }
    return digest;
}

static void test_containers()
{
    uint64_t d1 = churn(1, 60);
    uint64_t d2 = churn(1, 60);
    C(d1 == d2, "the same container churn gave two different digests");
    // the same from several threads at once, objects handed between threads
    std::vector<std::thread> th;
    std::vector<uint64_t> out(4);
    for (int t = 0; t < 4; t++)
        th.emplace_back([t, &out] { out[t] = churn(100 + t, 25); });
    for (auto &t : th)
        t.join();
    for (int t = 0; t < 4; t++)
        C(out[t] == churn(100 + t, 25), "thread %d churn digest differs from a single-thread run", t);
    // strings built in one thread, destroyed in another
    std::vector<std::string *> made;
    std::thread producer([&made] {
        for (int i = 0; i < 20000; i++)
            made.push_back(new std::string(static_cast<size_t>(i % 700), (char)('A' + i % 26)));
    });
    producer.join();
    std::thread consumer([&made] {
        for (size_t i = 0; i < made.size(); i++) {
            C(made[i]->size() == i % 700, "cross-thread string %zu has size %zu", i, made[i]->size());
            for (char c : *made[i])
                C(c == (char)('A' + i % 26), "cross-thread string %zu corrupted", i);
            delete made[i];
        }
    });
    consumer.join();
}

int main()
{
    hak_test_require_hakmem("test_cxx");
    if (hak_test_owns) {
        int *i = escape(new int(5));
        check_ours(i, "new int");
        delete i;
    }
    test_plain_new_delete();
    test_aligned_new();
    test_failure();
    test_containers();
    printf("test_cxx: OK: %lu checks: new/delete, new[]/delete[], sized delete, aligned new 1 B..1 MiB "
           "(alignas 64/4096/1 MiB), nothrow -> nullptr, bad_alloc, new_handler, containers (4 threads, "
           "cross-thread delete)%s\n",
           g_checks, hak_test_owns ? "" : " [plain]");
    return 0;
}
