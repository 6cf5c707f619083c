// sec_cxx - C++ deallocation mismatches: delete[] of a `new` object,
// delete of a `new[]` array whose elements have destructors (the pointer
// delete gets is past the array cookie), and a sized delete given the wrong
// size. See sec_harness.h for the verdicts.
#include "sec_harness.h"

#include <new>

struct Tracked {
    char buf[24];
    ~Tracked() { buf[0] = 0; }
};

static void delete_array_of_object()
{
    Tracked *p = new Tracked;
    delete[] static_cast<Tracked *>(ht_hide_ptr(p));
    sec_churn(32);
}

static void delete_object_of_array()
{
    Tracked *p = new Tracked[4];
    delete static_cast<Tracked *>(ht_hide_ptr(p));
    sec_churn(112);
}

static void sized_delete_mismatch()
{
    void *p = ::operator new(ht_hide(100));
    ::operator delete(ht_hide_ptr(p), ht_hide(7));
    sec_churn(100);
}

static const sec_case_t cases[] = {
    {"delete[]-of-new", delete_array_of_object},
    {"delete-of-new[]", delete_object_of_array},
    {"sized-delete-mismatch", sized_delete_mismatch},
};

SEC_MAIN(cases)
