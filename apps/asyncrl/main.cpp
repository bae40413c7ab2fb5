// The `asyncrl` command: every subcommand lives in the library (runtime/cli.cpp).
#include "apps/asyncrl/cli.hpp"

int main(int argc, char** argv) {
  return asyncrl::run_cli(argc, argv);
}
