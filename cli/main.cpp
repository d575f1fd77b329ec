// xpd command line: flags only; the physics lives in the scene file (docs/scene-format.md).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"xpd: Projective Dynamics soft-body simulator", "xpd"};
  app.set_version_flag("--version", XPD_VERSION_STRING);
  app.require_subcommand(1);
  xpd::cli::add_info_command(app);
  xpd::cli::add_convert_command(app);
  xpd::cli::add_run_command(app);
  xpd::cli::add_bench_command(app);
  xpd::cli::add_view_command(app);
  xpd::cli::add_render_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const xpd::Error& e) {
    std::fprintf(stderr, "xpd: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "xpd: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xpd: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
