// The specdec command-line tool; all logic lives in src/cli so that it can be tested.
#include "cli/commands.h"

int main(int argc, char** argv) { return specdec::cli::main_entry(argc, argv); }
