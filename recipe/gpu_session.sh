#!/usr/bin/env bash
# Everything the H200 is needed for, most important first (more than one 10-minute call in all: name the steps
# of each call), from the root of a checkout carrying .gpu-site (shared/tools/make-gpu-site.sh .gpu-site
# --service) and the bundles built on the CPU machine (laya-bundle build bundles/optimized; ... bundles/original
# --config original; ... bundles/tiny --model tiny):
#   recipe/gpu_session.sh OUT [STEP ...]       (default: every step, in this order)
# prepare      checkpoints synthesized (seed 0) and the bundles' tables exported for them (recipe/gpu_workdir.py)
# gpu-tests    tests/gpu: the cuda executor against the fp32 reference, tiny and large checkpoints
# parity       recipe.parity: distance to fp32, beside laya 0.3.20's bf16 path
# same-answers recipe/same_answers.sh: the parity corpus answered byte for byte by an older whole tree
#              (LAYA_AB_BASE_TREE, default ab_base/full: git archive COMMIT | tar -x) and by this one, with the
#              torch readout that tree ran
# readout-kernels  tests/kernels/test_readout_kernels.py on bundles/optimized
# compare      recipe.benchmark --compare: ours against laya stock bf16, laya fast and laya-cuda; batch scoring
# readme       recipe/gpu_readme_steps.sh: the README's "Run on a GPU" steps after the installs
# round-trips  recipe.broker_round_trips: kombu's stock QoS.append and QoS.ack on this host's Redis
# load         recipe.load with the cuda executor: 1, 8 and 32 sync clients on one worker, the executor's busy
#              share and issue 31's bar (API processes: LAYA_API_PROCESSES, default 4 in every step, as the README);
#              each one into load-N, so that "load load load" keeps three
# spin-ab      recipe.http_overhead (the lone client beside the prefork floor) with the API's and the worker's
#              polling waits off, the API's alone, and both (LAYA_API_SPIN_MS, LAYA_LINGER_MS, LAYA_SPIN_MS), twice
# load-torch-readout  the same with LAYA_TORCH_READOUT=1: what the readout kernels bought under load
# readout-ab   recipe.benchmark (ours alone) with the readout kernels and with --torch-readout, alternating, twice
# split-ab     recipe.benchmark (ours alone) with --split-k (split-K GEMMs at small M) and --no-split-k, alternating,
#              twice
# bench-ab     recipe.benchmark (ours alone): an older tree (LAYA_AB_BASE_TREE, as same-answers; its worker, laya_common,
#              recipe, bundle and kernels suffice) on a bundle built from it (LAYA_AB_BASE_BUNDLE, prepared here)
#              alternating with this one on bundles/optimized, twice: for a kernel change that changed entry points
# load-ab      recipe/ab.sh --own-stack with recipe.load (1, 8, 32 clients, one worker): an older tree of the
#              service (LAYA_AB_BASE, as overhead-ab) alternating with this one, twice
# service      recipe/gpu_service.sh: laya-stack with the cuda executor, compare_with_backend, a job, a batch
# overhead     recipe.http_overhead on a private stack with the cuda executor, beside the bare Celery floor
# beside       recipe.batch_beside_sync on a private stack with the cuda executor: sync 1x77 requests while a
#              10,000-state batch runs, against each alone
# overhead-ab  recipe/ab.sh with recipe.http_overhead: the same, alternating an older tree of the service
#              (LAYA_AB_BASE, default ab_base/tree: git archive COMMIT app worker laya_common) with this one, twice
# batch-ab     recipe/ab.sh with recipe.batch_throughput: /v1/batches end to end, alternating an older tree of
#              the service (LAYA_AB_BASE, as overhead-ab) with this one, three times
# abba-graphs  recipe.abba, CUDA graphs;   abba-eager: the same without graphs
# kernels      tests/kernels on the original and optimized bundles (LAYA_TEST_BUNDLES: others)
# profile      recipe.engine_profile: host functions and every launch of the chain
# ncu          recipe/chain_ncu.sh: Nsight Compute inside two layers' kernels at 1x80, 1x16, 1x80 with split-K and
#              16x512 (LAYA_NCU_BUCKETS)
# profile-load recipe/profile_load.sh: 32 sync clients on one worker while py-spy samples the worker
# routes       recipe.gemm_routes: each GEMM on the bundle's kernel against cuBLAS
# routes-hot   the same with every weight kept in L2 (--l2 hot): beside routes, what a prefetch could take off
# sweep        recipe.tile_sweep: the candidate bundles in bundles/sweep timed beside bundles/optimized, and
#              their GEMM and attention kernel tests (carry bundles/sweep, built by
#              `python -m recipe.tile_sweep build`)
# Each step has a time limit and a log; after each, OUT/gpu-session.tgz holds every output so far and
# OUT/steps.txt each step's exit status. Checkpoints stay in /tmp/gpu-ckpt for a later call on a warm machine.
set -uo pipefail
[ "${1:-}" = "--help" ] && { sed -n "/^set -uo/q;2,\$p" "$0"; exit 0; }
out=${1:?usage: recipe/gpu_session.sh OUT [STEP ...]}
shift
work=/tmp/gpu-session
source recipe/gpu_steps.sh
export LAYA_API_PROCESSES=${LAYA_API_PROCESSES:-4}  # every stack here serves as the README's GPU steps do
steps=${*:-prepare gpu-tests parity compare service overhead abba-graphs abba-eager kernels profile routes}
ckpt=$LAYA_GPU_WORKDIR/large/checkpoint
optimized=$LAYA_GPU_WORKDIR/large/optimized
original=$LAYA_GPU_WORKDIR/large/original
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$work/gpu.txt"
for s in $steps; do
  case $s in
    prepare) step prepare 150 python3 -m recipe.gpu_workdir large:bundles/optimized large:bundles/original \
               tiny:bundles/tiny ;;
    readout-kernels) LAYA_TEST_BUNDLES=bundles/optimized step readout-kernels 90 python3 -m pytest -q \
                       -p no:cacheprovider -rf tests/kernels/test_readout_kernels.py ;;
    kernels) LAYA_TEST_BUNDLES=${LAYA_TEST_BUNDLES:-bundles/original:bundles/optimized} \
               step kernels 90 python3 -m pytest -q -p no:cacheprovider tests/kernels ;;
    gpu-tests) step gpu-tests 240 python3 -m pytest -q -p no:cacheprovider -rf tests/gpu ;;
    parity) step parity 240 python3 -m recipe.parity --checkpoint "$ckpt" --bundle "$optimized" --per-class 100 \
              --output "$work/parity" ;;
    same-answers) NEW_ARGS=--torch-readout step same-answers 300 recipe/same_answers.sh "${LAYA_AB_BASE_TREE:-ab_base/full}" "$ckpt" \
                    "$optimized" "$work/same-answers" 50 ;;
    readme) step readme 300 recipe/gpu_readme_steps.sh "$ckpt" "$work/readme" ;;
    round-trips) redis-server --port 6390 --save "" --appendonly no >/dev/null &
                 sleep 1
                 step round-trips 60 python3 -m recipe.broker_round_trips --redis-url redis://127.0.0.1:6390/0 \
                   --output "$work/round-trips"
                 kill $! ;;
    load) n=1; while [ -e "$work/load-$n" ]; do n=$((n + 1)); done  # "load load load": three calls, each kept
          LAYA_EXECUTOR=cuda LAYA_CUDA_BUNDLE=$optimized step "load-$n" 300 python3 -m recipe.load --checkpoint "$ckpt" \
            --output "$work/load-$n" --inputs 1x77 --clients 1,8,32 --seconds 10 --workers 1 ;;
    load-torch-readout) LAYA_EXECUTOR=cuda LAYA_CUDA_BUNDLE=$optimized LAYA_TORCH_READOUT=1 step load-torch-readout 300 \
                          python3 -m recipe.load --checkpoint "$ckpt" --output "$work/load-torch-readout" --inputs 1x77 \
                          --clients 1,8,32 --seconds 10 --workers 1 ;;
    readout-ab) for round in 1 2; do
                  step "readout-ab-kernels-$round" 150 python3 -m recipe.benchmark --checkpoint "$ckpt" \
                    --bundle "$optimized" --output "$work/readout-ab/kernels-$round"
                  step "readout-ab-torch-$round" 150 python3 -m recipe.benchmark --checkpoint "$ckpt" \
                    --bundle "$optimized" --torch-readout --output "$work/readout-ab/torch-$round"
                done ;;
    spin-ab) for round in 1 2; do
               for cfg in off:0:0:0 api:5:0:0 both:5:50:5; do
                 IFS=: read -r name api linger spin <<< "$cfg"
                 LAYA_API_SPIN_MS=$api LAYA_LINGER_MS=$linger LAYA_SPIN_MS=$spin LAYA_EXECUTOR=cuda \
                   LAYA_CUDA_BUNDLE=$optimized step "spin-ab-$name-$round" 150 python3 -m recipe.stack \
                   --checkpoint "$ckpt" --logs "$work/spin-ab/$name-$round/logs" -- python3 -m recipe.http_overhead \
                   --output "$work/spin-ab/$name-$round" --samples 500 --clients 1 --floor-pools prefork
               done
             done ;;
    split-ab) for round in 1 2; do
                step "split-ab-split-$round" 150 python3 -m recipe.benchmark --checkpoint "$ckpt" \
                  --bundle "$optimized" --split-k --output "$work/split-ab/split-$round"
                step "split-ab-accumulate-$round" 150 python3 -m recipe.benchmark --checkpoint "$ckpt" \
                  --bundle "$optimized" --no-split-k --output "$work/split-ab/accumulate-$round"
              done ;;
    bench-ab) base_bundle=$LAYA_GPU_WORKDIR/large/$(basename "${LAYA_AB_BASE_BUNDLE:?a bundle built from the base tree}")
              step bench-ab-prepare 150 python3 -m recipe.gpu_workdir "large:$LAYA_AB_BASE_BUNDLE"
              for round in 1 2; do
                step "bench-ab-base-$round" 150 bash -c 'cd "$1" && PYTHONPATH=$PWD:$PYTHONPATH python3 -m recipe.benchmark \
                  --checkpoint "$2" --bundle "$3" --output "$4"' _ "${LAYA_AB_BASE_TREE:-ab_base/full}" "$ckpt" \
                  "$base_bundle" "$work/bench-ab/base-$round"
                step "bench-ab-this-$round" 150 python3 -m recipe.benchmark --checkpoint "$ckpt" --bundle "$optimized" \
                  --output "$work/bench-ab/this-$round"
              done ;;
    load-ab) step load-ab 480 recipe/ab.sh --own-stack "${LAYA_AB_BASE:-ab_base/tree}" "$ckpt" "$optimized" \
               "$work/load-ab" 2 python3 -m recipe.load --checkpoint "$ckpt" --inputs 1x77 --clients 1,8,32 --seconds 8 \
               --workers 1 --output ;;
    compare) step compare 400 python3 -m recipe.benchmark --checkpoint "$ckpt" --bundle "$optimized" --compare \
               --output "$work/compare" ;;
    service) step service 120 recipe/gpu_service.sh "$ckpt" "$optimized" "$work/service" ;;
    overhead) LAYA_EXECUTOR=cuda LAYA_CUDA_BUNDLE=$optimized step overhead 120 python3 -m recipe.stack \
                --checkpoint "$ckpt" --logs "$work/overhead/logs" -- python3 -m recipe.http_overhead \
                --output "$work/overhead" --samples 1000 --per-client 40 ;;
    beside) LAYA_EXECUTOR=cuda LAYA_CUDA_BUNDLE=$optimized step beside 300 python3 -m recipe.stack \
              --checkpoint "$ckpt" --logs "$work/beside/logs" -- python3 -m recipe.batch_beside_sync \
              --output "$work/beside" --states 10000 ;;
    overhead-ab) step overhead-ab 420 recipe/ab.sh "${LAYA_AB_BASE:-ab_base/tree}" "$ckpt" "$optimized" \
                   "$work/overhead-ab" 2 python3 -m recipe.http_overhead --samples 500 --per-client 30 \
                   --floor-pools prefork --floor-samples 200 --output ;;
    batch-ab) step batch-ab 420 recipe/ab.sh "${LAYA_AB_BASE:-ab_base/tree}" "$ckpt" "$optimized" "$work/batch-ab" 3 \
                python3 -m recipe.batch_throughput --batches 5 --output ;;
    abba-graphs) step abba-graphs 110 python3 -m recipe.abba --checkpoint "$ckpt" --optimized "$optimized" \
                   --original "$original" --output "$work/abba-graphs" ;;
    abba-eager) step abba-eager 120 python3 -m recipe.abba --checkpoint "$ckpt" --optimized "$optimized" \
                  --original "$original" --output "$work/abba-eager" --eager ;;
    profile) step profile 90 python3 -m recipe.engine_profile --checkpoint "$ckpt" --bundle "$optimized" \
               --output "$work/profile" ;;
    ncu) step ncu 420 recipe/chain_ncu.sh "$ckpt" "$optimized" "$work/ncu" ${LAYA_NCU_BUCKETS:-1x80 1x16 1x80:split 16x512} ;;
    profile-load) step profile-load 150 recipe/profile_load.sh "$work/profile-load" ;;
    routes) step routes 90 python3 -m recipe.gemm_routes --bundle bundles/optimized --output "$work/routes" ;;
    routes-hot) step routes-hot 90 python3 -m recipe.gemm_routes --bundle bundles/optimized --l2 hot \
                  --output "$work/routes-hot" ;;
    sweep) step sweep 240 python3 -m recipe.tile_sweep time bundles/sweep --baseline bundles/optimized \
             --output "$work/sweep"
           LAYA_TEST_BUNDLES=$(ls -d bundles/sweep/*/ | paste -sd:) step sweep-tests 150 python3 -m pytest -q \
             -p no:cacheprovider -rf tests/kernels/test_gemm.py tests/kernels/test_attention.py ;;
    *) echo "gpu_session: no step $s" | tee -a "$out/steps.txt" ;;
  esac
done
