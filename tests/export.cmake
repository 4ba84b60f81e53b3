# Exporters and the HTTP endpoint (src/export.c, src/http.c).
tslab_add_test(test_export SOURCES test_export.c LABELS export TIMEOUT 60)
tslab_add_test(test_http SOURCES test_http.c LABELS export TIMEOUT 60)
tslab_add_test(test_http_load SOURCES test_http_load.c LABELS export TIMEOUT 120)
tslab_add_test(test_http_fork SOURCES test_http_fork.c LABELS export TIMEOUT 120)

# test_export writes both documents; check_export.py holds them against
# docs/METRICS.md (both directions), its JSON Schema and promtool.
set_tests_properties(test_export PROPERTIES FIXTURES_SETUP export_documents)
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME test_export_doc
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_export.py
      ${PROJECT_SOURCE_DIR}/docs/METRICS.md
      ${CMAKE_CURRENT_BINARY_DIR}/test_export.json
      ${CMAKE_CURRENT_BINARY_DIR}/test_export.prom)
  set_tests_properties(test_export_doc PROPERTIES
    FIXTURES_REQUIRED export_documents LABELS export TIMEOUT 60)
else()
  message(WARNING "python3 not found: test_export_doc (docs/METRICS.md against the exporters) is not registered")
endif()
