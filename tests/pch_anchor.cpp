// The source of sluice_test_pch, the target that builds the test suites'
// precompiled header (tests/CMakeLists.txt): it needs one file to compile.
namespace sluice_test {
int PchAnchor();
int PchAnchor() { return 0; }
}  // namespace sluice_test
