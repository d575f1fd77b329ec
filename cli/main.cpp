// xpd command line: flags only; the physics lives in the scene file (docs/scene-format.md).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"xpd: Projective Dynamics soft-body simulator", "xpd"};
  // The version names the factorization a binary uses, which decides its licence (README, "Licence").
  app.set_version_flag("--version", XPD_CHOLMOD_LGPL_ONLY
                                        ? "xpd " XPD_VERSION_STRING " (CHOLMOD simplicial: LGPL modules only)"
                                        : "xpd " XPD_VERSION_STRING " (CHOLMOD supernodal: GPL-2.0+)");
  app.require_subcommand(1);
  xpd::cli::add_info_command(app);
  xpd::cli::add_convert_command(app);
  xpd::cli::add_run_command(app);
  xpd::cli::add_bench_command(app);
  xpd::cli::add_view_command(app);
  xpd::cli::add_render_command(app);
  xpd::cli::add_ccd_command(app);
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
