/* libtls_eater.so: takes 1 KiB of the static TLS block that glibc keeps for
 * libraries loaded with dlopen (initial-exec TLS), so that test_dlopen runs
 * where that reserve is used up. */
static __thread char g_eaten[1024] __attribute__((tls_model("initial-exec")));

char *tls_eater_touch(void)
{
    g_eaten[0] = 1;
    return g_eaten;
}
