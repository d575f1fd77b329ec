# Warnings as an interface target: every xpd target links it, dependencies never see it.
add_library(xpd_warnings INTERFACE)
target_compile_options(xpd_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)
