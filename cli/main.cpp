// xpd command line: flags only; the physics lives in the scene file.
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>

int main(int argc, char** argv) {
  CLI::App app{"xpd: Projective Dynamics soft-body simulator", "xpd"};
  app.set_version_flag("--version", XPD_VERSION_STRING);
  app.require_subcommand(1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
