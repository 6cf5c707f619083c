# Tests of the introspection and control API (issue 9): options, statistics,
# huge pages, named mappings, the documentation and the examples.

# Options: hak_option_get/set, run-time changes, one warning line for a
# malformed value; and the README's and docs/options.md's tables are the
# ones generated from the option table in the code.
hak_shared_exe(test_options test_options.c)
hak_plain_test(test_options 60)
add_test(NAME test_options_doc
  COMMAND python3 ${PROJECT_SOURCE_DIR}/scripts/options_table.py $<TARGET_FILE:hakmem>
          --check ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/options.md)
set_tests_properties(test_options_doc PROPERTIES TIMEOUT 60)

# Statistics from code: hak_stats_get/json/reset, mallinfo2 and malloc_info
# agreeing with them, HAKMEM_STATS=json at exit.
hak_shared_exe(test_stats test_stats.c)
hak_plain_test(test_stats 60)

# Huge pages: each HAKMEM_THP setting and HAKMEM_HUGE_PAGES=1 (with the
# kernel's hugetlb pool as it is: empty means every segment falls back).
hak_shared_exe(test_hugepage test_hugepage.c)
foreach(setting "HAKMEM_THP=system" "HAKMEM_THP=never" "HAKMEM_THP=auto" "HAKMEM_THP=always" "HAKMEM_THP=dense" "HAKMEM_HUGE_PAGES=1")
  string(REGEX REPLACE "^HAKMEM_" "" tag "${setting}")
  string(REPLACE "=" "_" tag "${tag}")
  string(TOLOWER "${tag}" tag)
  add_test(NAME test_hugepage_${tag} COMMAND test_hugepage)
  set_tests_properties(test_hugepage_${tag} PROPERTIES ENVIRONMENT "${setting}" TIMEOUT 60
    FAIL_REGULAR_EXPRESSION "${HAK_FAIL_REGEX}")
endforeach()

# Named mappings and scripts/hakmem-smaps.py (names: skipped, 77, where the
# kernel cannot name anonymous mappings).
add_executable(smaps_target smaps_target.c)
target_compile_options(smaps_target PRIVATE ${HAK_TEST_COPTS})
target_link_libraries(smaps_target PRIVATE hakmem)
add_test(NAME test_smaps_script COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_smaps.py script $<TARGET_FILE:smaps_target>)
add_test(NAME test_vma_names COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_smaps.py names $<TARGET_FILE:smaps_target>)
set_tests_properties(test_smaps_script test_vma_names PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)

# The API reference: header, docs/api.md, the README's list and the examples agree.
add_test(NAME test_api_doc COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_api_doc.py ${PROJECT_SOURCE_DIR})
set_tests_properties(test_api_doc PROPERTIES TIMEOUT 30)
