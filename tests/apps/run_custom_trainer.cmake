# cmake -DTRAINER=<my_trainer> -DCKPT=<ckpt> -DCONFIG=<my_job.toml> -DMODEL_DIR=<dir>
#       -P run_custom_trainer.cmake
# Trains the out-of-tree example (built in-tree with tandem_add_trainer) for 20 steps in
# a fresh model_dir, then checks its checkpoints with `ckpt verify`.
file(REMOVE_RECURSE ${MODEL_DIR})
execute_process(COMMAND ${TRAINER} train --config ${CONFIG} --set run.model_dir=${MODEL_DIR}
                        --set train.max_steps=20
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TRAINER} train: exit ${rc}")
endif()
execute_process(COMMAND ${CKPT} verify ${MODEL_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "OK .*model.ckpt-20: ")
  message(FATAL_ERROR "ckpt verify ${MODEL_DIR}: exit ${rc}, no checkpoint of step 20")
endif()
