// The `asyncrl` command: cli.cpp parses the arguments; each subcommand has its own file here.
#include "apps/asyncrl/cli.hpp"

int main(int argc, char** argv) {
  return asyncrl::run_cli(argc, argv);
}
