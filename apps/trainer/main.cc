// The main() of every trainer binary (library tandem::trainer_main): the binary's own
// sources define tandem::RegisterModels, this runs the trainer command line with it.
#include "apps/trainer/trainer_main.h"

int main(int argc, char** argv) { return tandem::TrainerMain(argc, argv, tandem::RegisterModels); }
