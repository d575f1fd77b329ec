#pragma once
// Subcommands of the xpd CLI. Each add_* registers its flags and callback on the app.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace xpd::cli {

void add_info_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_bench_command(CLI::App& app);
/// `bench collisions`, registered on the `bench` subcommand.
void add_bench_collisions_command(CLI::App& bench);
/// `bench ipc`, registered on the `bench` subcommand.
void add_bench_ipc_command(CLI::App& bench);
/// `bench cut`, registered on the `bench` subcommand.
void add_bench_cut_command(CLI::App& bench);
/// `bench gpu`, registered on the `bench` subcommand.
void add_bench_gpu_command(CLI::App& bench);
/// `bench twoway`, registered on the `bench` subcommand.
void add_bench_twoway_command(CLI::App& bench);
void add_view_command(CLI::App& app);
void add_render_command(CLI::App& app);
void add_ccd_command(CLI::App& app);

/// Prints a flat JSON result: indented JSON with `json`, else one "key value" line per entry with
/// the keys padded to `width`.
void print_result(const nlohmann::ordered_json& result, bool json, int width = 20);

/// Mesh argument shared by info/convert: a file path or a generator string ("box:N").
bool is_tet_format(const std::string& path);

}  // namespace xpd::cli
