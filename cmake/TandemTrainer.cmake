# tandem_add_trainer(NAME SOURCES src... [DEPS target...])
#
# Builds a trainer binary NAME from a user's sources: they define the Model subclasses
# and `void tandem::RegisterModels(tandem::ModelRegistry&)`; tandem::trainer_main
# supplies main() and the command line of apps/trainer/trainer_main.h (train, evaluate,
# predict, train_and_evaluate, models). DEPS are further libraries to link.
#
# Works in the tandem tree (ALIAS targets tandem::*) and from the installed package:
#   find_package(tandem REQUIRED)
#   tandem_add_trainer(my_trainer SOURCES my_model.cc)
include_guard(GLOBAL)

function(tandem_add_trainer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tandem_add_trainer(${name}): unexpected arguments "
                        "'${ARG_UNPARSED_ARGUMENTS}' (usage: tandem_add_trainer(NAME SOURCES "
                        "src... [DEPS target...]))")
  endif()
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "tandem_add_trainer(${name}): SOURCES is required (the files that "
                        "define tandem::RegisterModels and the models)")
  endif()
  if(NOT TARGET tandem::trainer_main)
    message(FATAL_ERROR "tandem_add_trainer(${name}): target tandem::trainer_main does not "
                        "exist; this tandem build has no apps/trainer/trainer_main.cc")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_compile_features(${name} PRIVATE cxx_std_20)
  target_link_libraries(${name} PRIVATE tandem::trainer_main tandem::estimator ${ARG_DEPS})
endfunction()
