#!/usr/bin/env bash
# Issue 41, call 1 (e5e478c: the users' loads as a test, the old queue protocol): the
# scenario three times at each size. Run as
#   nvidia-smi ...; cd .devrun && timeout 420 ./bam-cache-tests --scenario 134M,537M,1.07G 3
cd .devrun && timeout 420 ./bam-cache-tests --scenario 134M,537M,1.07G 3
