#pragma once

namespace asyncrl {

/// Parses the command line and runs the subcommand (sft, eval, generate, score, ...).
/// Returns the process exit code; errors are reported on stderr, never thrown.
int run_cli(int argc, char** argv);

}  // namespace asyncrl
