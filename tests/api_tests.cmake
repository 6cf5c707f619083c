# Tests of the introspection and control API (issue 9): options, statistics,
# huge pages, named mappings, the documentation and the examples.

# Options: hak_option_get/set, run-time changes, one warning line for a
# malformed value; and the README's and docs/options.md's tables are the
# ones generated from the option table in the code.
add_executable(test_options test_options.c)
target_compile_options(test_options PRIVATE ${HAK_TEST_COPTS})
target_include_directories(test_options PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(test_options PRIVATE hakmem Threads::Threads)
add_test(NAME test_options COMMAND test_options)
set_tests_properties(test_options PROPERTIES TIMEOUT 60 FAIL_REGULAR_EXPRESSION "${HAK_FAIL_REGEX}")
add_test(NAME test_options_doc
  COMMAND python3 ${PROJECT_SOURCE_DIR}/scripts/options_table.py $<TARGET_FILE:hakmem>
          --check ${PROJECT_SOURCE_DIR}/README.md)
set_tests_properties(test_options_doc PROPERTIES TIMEOUT 60)

# Statistics from code: hak_stats_get/json/reset, mallinfo2 and malloc_info
# agreeing with them, HAKMEM_STATS=json at exit.
add_executable(test_stats test_stats.c)
target_compile_options(test_stats PRIVATE ${HAK_TEST_COPTS})
target_include_directories(test_stats PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(test_stats PRIVATE hakmem Threads::Threads)
add_test(NAME test_stats COMMAND test_stats)
set_tests_properties(test_stats PROPERTIES TIMEOUT 60 FAIL_REGULAR_EXPRESSION "${HAK_FAIL_REGEX}")
