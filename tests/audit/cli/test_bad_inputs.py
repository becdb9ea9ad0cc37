"""Issue 40: every bad input, to every subcommand, is refused in one ``error:`` line that names the
value, with status 2, before any work and before any file or folder is created.

Each case is a command, the fragment its one line must hold, and (rarely) another status. It runs
in a fresh folder as the working directory, with ``--out`` inside it; afterwards that folder, the
fixture folder and the parents of the paths it names must list exactly as before. The work
itself (a sweep's session, a cell's data, an audit's runs, the attacks, a report's figures) is
replaced by :class:`WorkStarted`, so a check that lets a bad input through fails at once rather
than training. A handful of cases run as real processes too (:data:`PROCESS_CASES`): their exit
status, their stderr and no traceback.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import benchmark
from tests.audit.cli.bad_input_files import build, listing

ROOT = Path(__file__).resolve().parents[3]

SWEEP = "--dataset digits --profile quick --no-progress --no-report --out out"
ATTACK = (
    "attack --no-progress --members {fx}/members.npz --non-members {fx}/non-members.npz --out out"
)
WITH_SAMPLES = ATTACK + " --samples {fx}/samples.npz"
DECODER = ATTACK + " --decoder {fx}/model.py:good"
AUDIT = "audit --dataset digits --mech cdp --grid 1"
CHECK = "check --thresholds {fx}/thresholds.json {fx}/run"
CALIBRATE = "check --calibrate {fx}/run --write out/t.json"
REPORT = "report {fx}/run --out out/report"
EPSILON = "epsilon --mech cdp --n-train 1000 --batch-size 100 --epochs 10"
VAE_LDP = "epsilon --mech vae-ldp --latent-dim 8 --delta 1e-5"
LDP = "epsilon --mech ldp --height 8 --width 8"


def _missing_device(device: str) -> str | None:
    """What the refusal of CUDA device ``device`` says on this machine; None where it has it."""
    import torch

    if not torch.cuda.is_available():
        return "CUDA is not available here"
    count = torch.cuda.device_count()
    return None if int(device.partition(":")[2] or 0) < count else f"has {count} CUDA device(s)"


# (command, fragment of the one error line[, exit status]); {fx}: the fixture folder
CASES: dict[str, dict[str, tuple]] = {
    "tracebacks before": {
        "sweep truncated npz": (
            "--dataset npz:{fx}/truncated.npz --profile quick --out out",
            "is not a readable .npz archive of arrays X and y (BadZipFile)",
        ),
        "attack truncated members": (
            WITH_SAMPLES.replace("members.npz --non", "truncated-members.npz --non"),
            "is not a readable .npz archive",
        ),
        "attack truncated samples": (
            ATTACK + " --samples {fx}/truncated.npz",
            "--samples '{fx}/truncated.npz' is not a readable .npz archive",
        ),
        "cdp grid 1e300": (SWEEP + " --mech cdp --grid 1e300", "must lie in [0.0001, 1e+06]"),
        "cdp grid 1e-300": (SWEEP + " --mech cdp --grid 1e-300", "must lie in [0.0001, 1e+06]"),
        "vae-ldp grid 1e300": (SWEEP + " --mech vae-ldp --grid 1e300", "sigma must lie in"),
        "vae-ldp grid 1e-300": (SWEEP + " --mech vae-ldp --grid 1e-300", "sigma must lie in"),
        "dp2vae grid 1e300": (SWEEP + " --mech dp2vae --grid 1e300", "noise_multiplier must lie"),
        "cdp-termwise grid 1e-300": (
            SWEEP + " --mech cdp-termwise --grid 1e-300",
            "noise_multiplier must lie",
        ),
        "ldp grid 1e300": (SWEEP + " --mech ldp --grid 1e300", "eps_i must lie in"),
        "ldp grid 1e-300": (SWEEP + " --mech ldp --grid 1e-300", "eps_i must lie in"),
        "epsilon z 1e300": (EPSILON + " --noise-multiplier 1e300", "noise_multiplier must be 0 or"),
        "epsilon z 1e-300": (EPSILON + " --noise-multiplier 1e-300", "in [0.0001, 1e+06]"),
        "epsilon termwise z 1e300": (
            EPSILON.replace("cdp", "cdp-termwise") + " --noise-multiplier 1e300",
            "noise_multiplier must be 0 or",
        ),
        "epsilon dp2vae z 1e-300": (
            EPSILON.replace("cdp", "dp2vae") + " --noise-multiplier 1e-300",
            "noise_multiplier must be 0 or",
        ),
        "epsilon vae-ldp sigma 1e-300": (VAE_LDP + " --sigma 1e-300", "sigma must be a number in"),
        "epsilon vae-ldp sigma 1e300": (VAE_LDP + " --sigma 1e300", "sigma must be a number in"),
        "epsilon ldp eps_i 1e-300": (LDP + " --eps-i 1e-300", "eps_i must be a number in"),
        "audit grid 1e300": (AUDIT.replace("--grid 1", "--grid 1e300"), "must lie in"),
        "audit grid 1e-300": (AUDIT.replace("--grid 1", "--grid 1e-300"), "must lie in"),
        "thresholds nested 100000 deep": (
            CHECK.replace("thresholds.json", "nested.json"),
            "nested too deeply",
        ),
        "calibrate write under /proc": (
            CALIBRATE.replace("out/t.json", "/proc/x.json"),
            "--write '/proc/x.json' cannot be created",
        ),
        "calibrate write under a file": (
            CALIBRATE.replace("out/t.json", "{fx}/FILE/t.json"),
            "'{fx}/FILE' is a file, not a directory",
        ),
        "audit runs out a file": (
            AUDIT + " --runs 4 --out {fx}/FILE",
            "--out '{fx}/FILE' is an existing file",
        ),
        "lfw20 data home a file": (
            "--dataset lfw20 --profile quick --out out --data-home {fx}/FILE",
            "--data-home '{fx}/FILE' is a file; give a directory",
        ),
    },
    "devices": {
        **{
            f"{cmd} --device {dev!r}": (
                f"{base} --device '{dev}'",
                "choose auto, cpu, cuda or cuda:N",
            )
            for cmd, base in (("sweep", SWEEP), ("audit", AUDIT), ("attack", WITH_SAMPLES))
            for dev in ("mps", "tpu", "cuda:abc", "cuda:-1", "CUDA", "", "bogus", "AUTO", "auto:0")
        },
        **{
            f"{cmd} --device {dev}": (f"{base} --device {dev}", _missing_device(dev))
            for cmd, base in (("sweep", SWEEP), ("audit", AUDIT), ("attack", WITH_SAMPLES))
            for dev in ("cuda", "cuda:0", "cuda:7")
            if _missing_device(dev)
        },
        "sweep precision fp16 on cpu": (
            SWEEP + " --device cpu --precision fp16",
            "--precision fp16 needs a CUDA device, got --device cpu",
        ),
        **{
            f"sweep precision {value!r}": (
                f"{SWEEP} --precision '{value}'",
                f"argument --precision: invalid choice: '{value}'",
            )
            for value in ("bogus", "AUTO", "fp32", "")
        },
    },
    "sizes": {
        "sweep gen-records 2e9": (SWEEP + " --gen-records 2000000000", "more than this machine's"),
        "attack gen-records 2e9": (
            DECODER + " --gen-records 2000000000",
            "--gen-records 2000000000 would need about",
        ),
        "sweep attack-samples 1e9": (SWEEP + " --attack-samples 1000000000", "at most 30000"),
        "attack attack-samples 1e9": (
            WITH_SAMPLES + " --attack-samples 1000000000",
            "attack_samples must be at most 30000",
        ),
        "sweep epochs 1e9": (SWEEP + " --epochs 1000000000", "epochs must be at most 100000"),
        "sweep classifier-epochs 1e9": (
            SWEEP + " --classifier-epochs 1000000000",
            "classifier-epochs must be at most",
        ),
        "sweep classifier-patience 1e9": (
            SWEEP + " --classifier-patience 1000000000",
            "classifier-patience must be at most",
        ),
        "sweep reference-models 1e6": (
            SWEEP + " --reference-models 1000000",
            "reference-models must be at most 800",
        ),
        "sweep latent-dim 1e9": (SWEEP + " --latent-dim 1000000000", "latent-dim must be at most"),
        "sweep batch-size 100000 none": (
            SWEEP + " --batch-size 100000",
            "--batch-size 100000 exceeds |D_train| = 50",
        ),
        "sweep batch-size 51 cdp": (SWEEP + " --mech cdp --batch-size 51", "exceeds |D_train|"),
        "attack classifier-epochs 1e9": (
            WITH_SAMPLES + " --test {fx}/labelled-test.npz --classifier-epochs 1000000000",
            "classifier_epochs must be at most",
        ),
        "audit canaries 1e9": (AUDIT + " --canaries 1000000000", "--canaries must be at most"),
        "audit runs 1e6": (AUDIT + " --runs 1000000 --out out", "--runs must be at most 1000"),
        "audit draws 1e12": (
            "audit --dataset digits --mech ldp --grid 1 --draws 1000000000000",
            "--draws must be at most",
        ),
        "audit copies 1e6": (
            AUDIT + " --canary-kind input --copies 1000000",
            "--copies must be at most 100",
        ),
    },
    "numbers": {
        "sweep grid nan": (SWEEP + " --mech cdp --grid nan", "expected a finite number"),
        "sweep grid inf": (SWEEP + " --mech cdp --grid inf", "expected a finite number"),
        "sweep grid 0": (
            SWEEP + " --mech cdp --grid 0",
            "grid values must be positive finite numbers, got 0.0",
        ),
        "sweep grid -1": (
            SWEEP + " --mech cdp --grid -1",
            "grid values must be positive finite numbers",
        ),
        "sweep grid text": (SWEEP + " --mech cdp --grid one", "expected a number, got 'one'"),
        "sweep lr nan": (SWEEP + " --lr nan", "expected a finite number, got 'nan'"),
        "sweep lr 0": (SWEEP + " --lr 0", "lr must be a positive finite number"),
        "sweep beta -1": (SWEEP + " --beta -1", "beta must be a non-negative"),
        "sweep beta inf": (SWEEP + " --beta inf", "expected a finite number"),
        "sweep epochs 0": (SWEEP + " --epochs 0", "epochs must be a positive integer"),
        "sweep epochs 1e9 text": (SWEEP + " --epochs 1e9", "invalid int value: '1e9'"),
        "sweep batch-size 0": (SWEEP + " --batch-size 0", "batch-size must be a positive"),
        "sweep latent-dim -1": (SWEEP + " --latent-dim -1", "latent-dim must be a positive"),
        "sweep attack-samples 0": (SWEEP + " --attack-samples 0", "attack-samples must be a pos"),
        "sweep attack-records 1": (SWEEP + " --attack-records 1", "attack-records must be an int"),
        "sweep attack-records word": (SWEEP + " --attack-records some", "an integer or 'all'"),
        "sweep max-train 0": (SWEEP + " --max-train 0", "max-train must be an integer >= 2"),
        "sweep gen-records 1": (SWEEP + " --gen-records 1", "gen-records must be an integer >= 2"),
        "sweep reference-models -1": (SWEEP + " --reference-models -1", "must be an integer >= 0"),
        "sweep seeds -1": (SWEEP + " --seeds -1", "seed"),
        "sweep workers 0": (SWEEP + " --workers 0", "--workers must be between 1 and 64"),
        "sweep workers 65": (SWEEP + " --workers 65", "(or auto), got 65"),
        "sweep workers text": (
            SWEEP + " --workers many",
            "expected an integer or 'auto', got 'many'",
        ),
        "sweep workers ray": (
            SWEEP + " --workers 2 --executor ray",
            "--workers applies to --executor local only",
        ),
        "sweep tune 0": (SWEEP + " --tune 0", "--tune must be a positive integer (trials), got 0"),
        "sweep tune -2": (
            SWEEP + " --tune -2",
            "--tune must be a positive integer (trials), got -2",
        ),
        "sweep tune 2.5": (SWEEP + " --tune 2.5", "argument --tune: invalid int value: '2.5'"),
        "sweep tune text": (SWEEP + " --tune some", "argument --tune: invalid int value: 'some'"),
        "sweep tune 1001": (SWEEP + " --tune 1001", "--tune must be at most 1000 trials"),
        "sweep tune 1e9": (SWEEP + " --tune 1000000000", "got 1000000000"),
        "sweep tune-seed -1": (SWEEP + " --tune 2 --tune-seed -1", "--tune-seed must be a non-neg"),
        "sweep tune-seed 0.5": (SWEEP + " --tune 2 --tune-seed 0.5", "invalid int value: '0.5'"),
        "sweep tune-seed without tune": (SWEEP + " --tune-seed 3", "applies with --tune only"),
        "sweep window-stride on digits": (SWEEP + " --window-stride 10", "--window-stride applies"),
        "sweep cell-cpus without ray": (SWEEP + " --cell-cpus 2", "apply to --executor ray only"),
        "sweep cell-cpus nan": (SWEEP + " --cell-cpus nan", "expected a finite number"),
        "sweep clip-norm nan": (SWEEP + " --mech cdp --clip-norm nan", "clip"),
        "sweep clip-norm 1e300": (SWEEP + " --mech cdp --clip-norm 1e300", "must lie in [1e-06"),
        "sweep dp2vae clip-norm 1e-300": (
            SWEEP + " --mech dp2vae --clip-norm 1e-300",
            "clip norm must lie in [1e-06, 1e+06]",
        ),
        "audit clip-norm 1e300": (AUDIT + " --clip-norm 1e300", "clip norm must lie in"),
        "sweep vae-ldp grid 1e7": (SWEEP + " --mech vae-ldp --grid 1e7", "sigma must lie in"),
        "epsilon ldp eps_i 1e13": (LDP + " --eps-i 1e13", "in [0.0001, 1e+12]"),
        "sweep delta 1": (SWEEP + " --mech cdp --delta 1", "delta must lie in the open interval"),
        "sweep delta nan": (SWEEP + " --mech cdp --delta nan", "delta must lie in the open"),
        "sweep target-epsilon 0": (SWEEP + " --mech cdp --target-epsilon 0", "finite number > 0"),
        "sweep target-epsilon with grid": (
            SWEEP + " --mech cdp --target-epsilon 1 --grid 1",
            "give either --target-epsilon or --grid",
        ),
        "attack epsilon nan delta nan": (
            WITH_SAMPLES + " --epsilon nan --delta nan",
            "argument --epsilon: expected a finite number, got 'nan'",
        ),
        "attack epsilon inf": (WITH_SAMPLES + " --epsilon inf --delta 0", "expected a finite"),
        "attack delta nan": (WITH_SAMPLES + " --epsilon 1 --delta nan", "expected a finite"),
        "attack epsilon 0": (WITH_SAMPLES + " --epsilon 0 --delta 0", "finite epsilon > 0"),
        "attack delta 1": (WITH_SAMPLES + " --epsilon 1 --delta 1", "0 <= delta < 1"),
        "attack epsilon alone": (WITH_SAMPLES + " --epsilon 1", "go together"),
        "attack seed -1": (WITH_SAMPLES + " --seed -1", "seed must be a non-negative integer"),
        "attack attack-samples 0": (WITH_SAMPLES + " --attack-samples 0", "attack_samples must"),
        "attack gen-records 0": (DECODER + " --gen-records 0", "gen_records must be a positive"),
        "audit grid 0": (AUDIT.replace("--grid 1", "--grid 0"), "--grid must be a positive"),
        "audit grid nan": (AUDIT.replace("--grid 1", "--grid nan"), "expected a finite number"),
        "audit canaries 0": (AUDIT + " --canaries 0", "--canaries must be a positive integer"),
        "audit canaries 1": (AUDIT + " --canaries 1", "canaries must be an integer >= 2"),
        "audit k-plus above m": (AUDIT + " --canaries 10 --k-plus 11", "k_plus + k_minus <="),
        "audit k-minus -1": (AUDIT + " --canaries 10 --k-minus -1", "k_plus, k_minus >= 0"),
        "audit runs 1": (AUDIT + " --runs 1 --out out", "--runs must be an integer >= 2"),
        "audit delta 1": (AUDIT + " --delta 1", "--delta must lie in (0, 1)"),
        "audit delta nan": (AUDIT + " --delta nan", "expected a finite number"),
        "audit seed -1": (AUDIT + " --seed -1", "--seed must be >= 0"),
        "audit clip-norm 0": (AUDIT + " --clip-norm 0", "--clip-norm must be a positive"),
        "audit draws 1": ("audit --dataset digits --mech ldp --grid 1 --draws 1", "--draws must"),
        "audit copies 0": (AUDIT + " --canary-kind input --copies 0", "--copies must be a"),
        "epsilon n-train 0": (EPSILON.replace("1000", "0") + " --noise-multiplier 1", "n_train"),
        "epsilon batch above n-train": (
            EPSILON.replace("--batch-size 100", "--batch-size 2000") + " --noise-multiplier 1",
            "batch_size must not exceed n_train",
        ),
        "epsilon epochs -1": (
            EPSILON.replace("--epochs 10", "--epochs -1") + " --noise-multiplier 1",
            "epochs must be an integer >= 1",
        ),
        "epsilon delta 0": (EPSILON + " --noise-multiplier 1 --delta 0", "delta must lie in"),
        "epsilon delta nan": (EPSILON + " --noise-multiplier 1 --delta nan", "delta must lie"),
        "epsilon target nan": (EPSILON + " --target-epsilon nan", "target epsilon must be"),
        "epsilon target inf": (EPSILON + " --target-epsilon inf", "target epsilon must be"),
        "epsilon target 1e300": (EPSILON + " --target-epsilon 1e300", "so large that"),
        "epsilon z nan": (EPSILON + " --noise-multiplier nan", "noise_multiplier must be 0 or"),
        "epsilon z -1": (EPSILON + " --noise-multiplier -1", "noise_multiplier must be 0 or"),
        "epsilon vae-ldp latent 0": (VAE_LDP.replace("8", "0") + " --sigma 1", "latent_dim"),
        "epsilon ldp height 0": (LDP.replace("--height 8", "--height 0") + " --eps-i 1", "height"),
        "epsilon ldp eps_i inf": (LDP + " --eps-i inf", "eps_i must be a number in"),
        "epsilon needs its params": ("epsilon --mech cdp --noise-multiplier 1", "needs --n-train"),
        "report limits nan": (REPORT + " --limits nan", "expected a finite number"),
        "report limits 1.5": (REPORT + " --limits 1.5", "MI AP limits must lie in (0, 1]"),
        "report limits 0": (REPORT + " --limits 0", "MI AP limits must lie in (0, 1]"),
        "calibrate sigmas nan": (CALIBRATE + " --sigmas nan", "expected a finite number"),
        "calibrate sigmas -1": (CALIBRATE + " --sigmas -1", "--sigmas must be a non-negative"),
        "calibrate tolerance 2": (CALIBRATE + " --tolerance 2", "--tolerance"),
    },
    "accepted nonsense before": {
        "audit gradient with label-slot design": (
            AUDIT + " --canary-kind gradient --input-design label-slot",
            "--input-design applies to input canaries only",
        ),
        "audit gradient with reference model": (
            AUDIT + " --reference-model",
            "--reference-model applies to input canaries only",
        ),
        "digits data home a file": (
            SWEEP + " --data-home {fx}/FILE",
            "--dataset digits reads none, drop --data-home",
        ),
        "digits data home a folder": (
            SWEEP + " --data-home {fx}/adir",
            "--data-home applies to the datasets read from disk",
        ),
        "audit digits data home": (AUDIT + " --data-home {fx}/adir", "reads none"),
        "npz data home": (
            "--dataset npz:{fx}/good.npz --profile quick --out out --data-home {fx}/adir",
            "reads none",
        ),
        "attack series on 8x8 images": (
            ATTACK.replace("members.npz", "images-3d.npz").replace(
                "non-images-3d", "images-3d-non-members"
            )
            + " --samples {fx}/images-3d.npz --modality series",
            "--modality series, but no value of --members and --non-members is below 0",
        ),
        "attack non-members 1e-7 from members": (
            WITH_SAMPLES.replace("non-members.npz", "near-non-members.npz"),
            "of --members also appear in --non-members (equal within 0.001 in every value",
        ),
        "attack reference 5e-4 from members": (
            WITH_SAMPLES + " --reference {fx}/near-reference.npz",
            "1 record(s) of --members also appear in --reference (equal within 0.001",
        ),
        "attack reference near non-members": (
            WITH_SAMPLES + " --reference {fx}/near-ref-non-members.npz",
            "of --non-members also appear in --reference",
        ),
        "attack gen-records with samples": (
            WITH_SAMPLES + " --gen-records 10",
            "--gen-records sets how many samples the decoder draws",
        ),
        "attack classifier-epochs without test": (
            WITH_SAMPLES + " --classifier-epochs 5",
            "--classifier-epochs applies with --test only",
        ),
        "attack decoder exits 0": (
            ATTACK + " --decoder {fx}/model.py:exits",
            "--decoder '{fx}/model.py:exits' called sys.exit(0)",
        ),
        "attack decoder exits text": (
            ATTACK + " --decoder {fx}/model.py:exits_with_text",
            "called sys.exit('bye')",
        ),
        "attack module exits at import": (
            ATTACK + " --decoder {fx}/exits_at_import.py:f",
            "exits_at_import.py:f' called sys.exit(0)",
        ),
        "attack decode exits": (
            ATTACK + " --decoder {fx}/model.py:exits_in_decode",
            "called sys.exit(3)",
        ),
        "attack no release": (ATTACK, "give the release"),
    },
    "refusals that wrote": {
        "sweep executor ray without ray": (SWEEP + " --executor ray", "needs Ray"),
        "lfw20 data home missing": (
            "--dataset lfw20 --profile quick --out out --data-home {fx}/adir/nothing/here",
            "needs LFW, which is not in",
        ),
        "face-embedding on digits": (
            SWEEP + " --classifier face-embedding",
            "face-embedding",  # the extra's install hint, or (installed) the RGB check
        ),
        "attack unknown attack": (WITH_SAMPLES + " --attack gan", "not a registered attack"),
        "attack labels on one side only": (
            WITH_SAMPLES.replace("{fx}/members.npz", "{fx}/labelled-test.npz"),
            "must both carry labels",
        ),
        "attack name with slash": (WITH_SAMPLES + " --name a/b", "--name must be one line"),
        "attack vae and decoder": (DECODER + " --vae x:y", "not allowed with argument"),
    },
    "messages": {
        "thresholds not utf-8": (
            CHECK.replace("thresholds.json", "latin1.json"),
            "--thresholds '{fx}/latin1.json' is not UTF-8 text",
        ),
        "thresholds a directory": (
            CHECK.replace("thresholds.json", "adir"),
            "--thresholds '{fx}/adir' is a directory; give the thresholds file itself",
        ),
        "decoder NaN": (
            ATTACK + " --decoder {fx}/model.py:nan_everywhere",
            "--decoder: decode returned NaN or infinite values",
        ),
        "decoder NaN off the mode": (
            ATTACK + " --decoder {fx}/model.py:nan_off_the_mode",
            "--decoder: decode returned NaN or infinite values for",
        ),
        "decoder prints 600 lines": (
            ATTACK + " --decoder {fx}/model.py:chatty",
            "returned int, which lacks decode",
        ),
        "decoder is benchmark main": (
            ATTACK + f" --decoder {ROOT}/benchmark.py:main",
            "returned int, which lacks decode",
        ),
    },
}

# refusals that the commands' own tests held before this suite, now also checked for being one
# line before any work with nothing written
CASES["kept refusals"] = {
    "sweep unknown dataset mnist": (SWEEP.replace("digits", "mnist"), "unknown dataset 'mnist'"),
    "sweep unknown mechanism": (SWEEP + " --mech dpsgd", "unknown mechanism 'dpsgd'"),
    "sweep seeds -3": (SWEEP + " --seeds -3", "non-negative"),
    "sweep unknown profile": (SWEEP + " --profile huge", "invalid choice: 'huge'"),
    "sweep device tpu": (SWEEP + " --device tpu", "unknown device 'tpu'"),
    "sweep max-train many": (SWEEP + " --max-train many", "expected an integer or 'all'"),
    "sweep npz does not exist": (
        SWEEP.replace("digits", "npz:/does/not/exist.npz"),
        "does not exist",
    ),
    "motionsense stride 0": (
        SWEEP.replace("digits", "motionsense") + " --window-stride 0",
        "must be a positive integer, got 0",
    ),
    "motionsense stride -250": (
        SWEEP.replace("digits", "motionsense") + " --window-stride -250",
        "positive integer, got -250",
    ),
    "motionsense stride 2.5": (
        SWEEP.replace("digits", "motionsense") + " --window-stride 2.5",
        "invalid int value: '2.5'",
    ),
    "basicmotions stride": (
        SWEEP.replace("digits", "basicmotions") + " --window-stride 50",
        "not to 'basicmotions'",
    ),
    "sweep termwise composed": (
        SWEEP + " --mech cdp-termwise --termwise-accounting composed",
        "termwise accounting 'composed' is refused",
    ),
    "sweep cdp batch 60": (SWEEP + " --mech cdp --batch-size 60", "exceeds |D_train| = 50"),
    "sweep microbatch 0": (SWEEP + " --mech cdp --microbatch 0", "microbatch must be an integer"),
    "sweep microbatch 2.5": (SWEEP + " --mech cdp --microbatch 2.5", "invalid int value: '2.5'"),
    "sweep microbatch above batch": (
        SWEEP + " --mech cdp --microbatch 17",
        "--microbatch 17 exceeds the batch size B = 16",
    ),
    "sweep ldp microbatch": (SWEEP + " --mech ldp --microbatch 4", "--microbatch does not apply"),
    "sweep termwise microbatch": (
        SWEEP + " --mech cdp-termwise --microbatch 4",
        "--microbatch does not apply to --mech cdp-termwise",
    ),
    "sweep ldp pixel block 3": (
        SWEEP + " --mech ldp --pixel-block 3",
        "pixel block b=3 does not tile the 8x8",
    ),
    "sweep ldp scope": (SWEEP + " --mech ldp --ldp-scope some", "unknown ldp scope 'some'"),
    "sweep vae-ldp perturbation data": (
        SWEEP + " --mech vae-ldp --perturbation-data x",
        "unknown perturbation data 'x'",
    ),
    "sweep ldp target-epsilon": (
        SWEEP + " --mech ldp --target-epsilon 5",
        "--target-epsilon does not apply to --mech",
    ),
    "sweep ldp clip-norm": (SWEEP + " --mech ldp --clip-norm 1", "--clip-norm does not apply"),
    "sweep none grid": (SWEEP + " --mech none --grid 1", "--grid does not apply to --mech none"),
    "sweep two parameters one grid": (
        SWEEP + " --mech cdp ldp --grid 1",
        "cdp: noise_multiplier, ldp: eps_i",
    ),
    "sweep all with grid": (SWEEP + " --mech all --grid 1", "with a --grid each"),
    "sweep abbreviation": (SWEEP + " --epoch 3", "unrecognized arguments: --epoch"),
    "sweep device cuda:banana": (SWEEP + " --device cuda:banana", "unknown device 'cuda:banana'"),
    "sweep npz below SSIM's window": (
        "--dataset npz:{fx}/small-5x5.npz --profile quick --no-progress --out out "
        "--mech none cdp --grid 1",
        "SSIM's 7x7 window",
    ),
    "audit ldp grid -1": (
        "audit --mech ldp --grid -1",
        "--grid must be a positive finite number",
    ),
    "audit unknown mechanism": ("audit --mech dpsgd --grid 1", "invalid choice: 'dpsgd'"),
    "audit no grid": ("audit --mech ldp", "required: --grid"),
    "audit canaries for ldp": (
        "audit --mech ldp --grid 1 --canaries 5",
        "apply to cdp, cdp-termwise, dp2vae only",
    ),
    "audit draws for cdp": (AUDIT + " --draws 5", "--draws applies to ldp"),
    "audit ldp draws 0": ("audit --mech ldp --grid 1 --draws 0", "--draws must be a positive"),
    "audit ldp delta": ("audit --mech ldp --grid 1 --delta 1e-5", "does not apply to ldp"),
    "audit vae-ldp delta 2": (
        "audit --mech vae-ldp --grid 1 --delta 2",
        "--delta must lie in (0, 1)",
    ),
    "audit unknown dataset": ("audit --mech ldp --grid 1 --dataset mnist", "unknown dataset"),
    "audit guesses above m": (AUDIT + " --canaries 10 --k-plus 9 --k-minus 9", "k_plus"),
    "audit runs for ldp": ("audit --mech ldp --grid 1 --runs 4 --out x", "--runs applies to cdp"),
    "audit runs without out": (AUDIT + " --runs 4", "--runs needs --out"),
    "audit guess rule": (AUDIT + " --guess-rule half", "invalid choice: 'half'"),
    "audit copies gradient": (AUDIT + " --copies 2", "--copies applies to input canaries"),
    "audit input copies 0": (AUDIT + " --copies 0", "--copies must be a positive"),
    "attack records differ in shape": (
        WITH_SAMPLES.replace("/non-members.npz", "/shape-7x7.npz"),
        "differ in shape",
    ),
    "attack float range": (
        WITH_SAMPLES.replace("/non-members.npz", "/range-2.npz"),
        "float X has min",
    ),
    "attack storage": (
        WITH_SAMPLES.replace("/non-members.npz", "/uint8-non-members.npz"),
        "store X differently",
    ),
    "attack exact duplicate non-member": (
        WITH_SAMPLES.replace("/non-members.npz", "/dup-non-members.npz"),
        "1 record(s) of --members also appear in --non-members",
    ),
    "attack exact duplicate reference": (
        WITH_SAMPLES + " --reference {fx}/dup-reference.npz",
        "also appear in --reference",
    ),
    "attack too few members": (
        WITH_SAMPLES.replace("/members.npz --non", "/few-members.npz --non"),
        "holds 9 records",
    ),
    "attack labels on members only": (
        WITH_SAMPLES.replace("/members.npz --non", "/labelled-members.npz --non"),
        "both carry labels",
    ),
    "attack samples missing": (
        ATTACK + " --samples /nonexistent.npz",
        "--samples '/nonexistent.npz' does not exist",
    ),
    "attack images as series": (WITH_SAMPLES + " --modality series", "series X must be floats"),
    "attack series out of range": (
        WITH_SAMPLES.replace("/members.npz --non", "/series-3.npz --non") + " --modality series",
        "series X has min 0.005414 and max 2.994; allowed: values in [-1, 1]",
    ),
    "attack decoder fails": (ATTACK + " --decoder {fx}/model.py:failing", "decode failed on one"),
    "attack decoder wrong shape": (
        ATTACK + " --decoder {fx}/model.py:wrong_shape",
        "expected a tensor of shape (2, 1, 8, 8)",
    ),
    "attack decoder out of range": (
        ATTACK + " --decoder {fx}/model.py:unbounded",
        "the records lie in [0, 1]",
    ),
    "attack decoder given as vae": (ATTACK + " --vae {fx}/model.py:good", "without encode"),
    "attack not a model": (ATTACK + " --decoder {fx}/model.py:not_a_model", "lacks decode(z, y)"),
    "attack no such function": (
        ATTACK + " --decoder {fx}/model.py:nothing_here",
        "has no function 'nothing_here'",
    ),
    "attack conditional without labels": (
        ATTACK + " --decoder {fx}/model.py:conditional",
        "carry none",
    ),
    "attack claim without delta": (WITH_SAMPLES + " --epsilon 1", "--epsilon and --delta go"),
    "attack negative claim": (WITH_SAMPLES + " --epsilon -1 --delta 0", "finite epsilon > 0"),
    "attack reconstruction on samples": (
        WITH_SAMPLES + " --attack reconstruction",
        "--attack reconstruction needs",
    ),
    "epsilon ldp sigma": ("epsilon --mech ldp --eps-i 1 --sigma 2", "--sigma does not apply"),
    "epsilon ldp needs shape": ("epsilon --mech ldp --eps-i 1", "needs --height, --width"),
    "epsilon ldp pixel block 5": (
        LDP.replace("8", "64") + " --eps-i 1 --pixel-block 5",
        "valid b: 1, 2, 4",
    ),
    "epsilon ldp m 65": (LDP + " --eps-i 1 --m 65", "choose 1..64"),
    "epsilon cdp eps-i": (EPSILON + " --noise-multiplier 1 --eps-i 1", "--eps-i does not apply"),
    "epsilon vae-ldp n-train": (VAE_LDP + " --sigma 1 --n-train 5", "--n-train"),
    "epsilon cdp no batch size": (
        "epsilon --mech cdp --n-train 10 --epochs 1 --noise-multiplier 1",
        "needs --batch-size",
    ),
    "epsilon cdp no noise": (EPSILON, "exactly one of"),
    "epsilon cdp both noise options": (
        EPSILON + " --noise-multiplier 1 --target-epsilon 2",
        "exactly one of --noise-multiplier, --target-epsilon",
    ),
    "epsilon vae-ldp no delta": (
        "epsilon --mech vae-ldp --sigma 1 --latent-dim 10",
        "needs --delta",
    ),
    "epsilon cdp conversion analytic": (
        EPSILON + " --noise-multiplier 1 --conversion analytic",
        "'analytic'; choose one of: classic, improved",
    ),
    "epsilon vae-ldp conversion improved": (
        VAE_LDP + " --sigma 1 --conversion improved",
        "choose one of: classic, analytic",
    ),
    "epsilon cdp delta 2": (EPSILON + " --noise-multiplier 1 --delta 2", "open interval"),
    "epsilon ldp eps-i -1": (LDP + " --eps-i -1", "got -1.0"),
    "epsilon termwise composed": (
        EPSILON.replace("cdp", "cdp-termwise")
        + " --noise-multiplier 1 --termwise-accounting composed",
        "'composed' is refused",
    ),
    **{
        f"epsilon partition sensitivity {k}": (
            EPSILON.replace("cdp", "cdp-termwise")
            + f" --noise-multiplier 1 --partition-sensitivity {k}",
            "partition_sensitivity",
        )
        for k in ("0", "0.5", "3")
    },
    "epsilon unknown mechanism": ("epsilon --mech none", "invalid choice: 'none'"),
    "report abbreviation": (REPORT + " --form png", "unrecognized arguments: --form"),
    "check abbreviation": (CHECK + " --thresh x", "unrecognized arguments: --thresh"),
}

# a path argument of every subcommand: missing, a folder for a file and a file for a folder,
# empty, not UTF-8, not what it should hold, unwritable, under a file
PATHS: dict[str, tuple] = {
    "sweep out a file": (SWEEP.replace("--out out", "--out {fx}/FILE"), "is an existing file"),
    "sweep out under a file": (
        SWEEP.replace("--out out", "--out {fx}/FILE/sub"),
        "'{fx}/FILE' is a file, not a directory",
    ),
    "sweep out under /proc": (SWEEP.replace("--out out", "--out /proc/x"), "cannot be created"),
    "sweep out empty": (
        SWEEP.replace("--out out", "--out ''"),
        "argument --out: expected a path, got an empty one",
    ),
    "sweep npz missing": (
        "--dataset npz:{fx}/nothing.npz --profile quick --out out",
        "does not exist",
    ),
    "sweep npz a folder": ("--dataset npz:{fx}/folder.npz --out out", "is a directory"),
    "sweep npz empty": ("--dataset npz:{fx}/empty.npz --out out", "not a readable .npz"),
    "sweep npz text": ("--dataset npz:{fx}/text.npz --out out", "not a readable .npz"),
    "sweep unknown dataset": ("--dataset nowhere --out out", "unknown dataset 'nowhere'"),
    **{
        f"attack --{role} {what}": (
            (WITH_SAMPLES if role != "samples" else ATTACK)
            + (" --test {fx}/labelled-test.npz" if role == "test" else "")
            + (" --reference {fx}/reference.npz" if role == "reference" else ""),
            message,
            role,
            path,
        )
        for role in ("members", "non-members", "reference", "samples", "test")
        for what, path, message in (
            ("missing", "{fx}/nothing.npz", "does not exist"),
            ("a folder", "{fx}/adir", "is a directory; give the .npz file itself"),
            ("empty", "{fx}/empty.npz", "is an empty file"),
            ("text", "{fx}/text.npz", "is not a readable .npz archive"),
            ("truncated", "{fx}/truncated.npz", "is not a readable .npz archive"),
            ("empty name", "", "expected a path, got an empty one"),
        )
    },
    "attack out a file": (WITH_SAMPLES.replace("--out out", "--out {fx}/FILE"), "existing file"),
    "attack out under a file": (
        WITH_SAMPLES.replace("--out out", "--out {fx}/FILE/x"),
        "is a file, not a directory",
    ),
    "attack out under /proc": (WITH_SAMPLES.replace("--out out", "--out /proc/x"), "cannot be"),
    "attack out empty": (
        WITH_SAMPLES.replace("--out out", "--out ''"),
        "argument --out: expected a path, got an empty one",
    ),
    "attack out holds a sweep": (
        WITH_SAMPLES.replace("--out out", "--out {fx}/sweep-out"),
        "holds a sweep's results",
    ),
    "attack decoder file missing": (
        ATTACK + " --decoder {fx}/nothing.py:f",
        "cannot import",
    ),
    "attack decoder a folder": (ATTACK + " --decoder {fx}/adir:f", "cannot import"),
    "attack decoder syntax error": (ATTACK + " --decoder {fx}/broken.py:f", "SyntaxError"),
    "attack decoder not utf-8": (ATTACK + " --decoder {fx}/latin1.py:f", "cannot import"),
    "attack decoder no function": (ATTACK + " --decoder {fx}/model.py:nope", "has no function"),
    "attack decoder no colon": (ATTACK + " --decoder {fx}/model.py", "expected PKG.MOD:FN"),
    "attack decoder unknown module": (ATTACK + " --decoder no.such.mod:f", "cannot import"),
    "audit out under a file": (AUDIT + " --runs 4 --out {fx}/FILE/x", "is a file, not a dir"),
    "audit out under /proc": (AUDIT + " --runs 4 --out /proc/x", "cannot be created"),
    "audit out without runs": (AUDIT + " --out out", "--out and --executor apply with --runs"),
    "audit npz missing": (
        AUDIT.replace("digits", "npz:{fx}/nothing.npz"),
        "does not exist",
    ),
    "audit npz truncated": (AUDIT.replace("digits", "npz:{fx}/truncated.npz"), "not a readable"),
    "audit lfw20 data home a file": (
        AUDIT.replace("digits", "lfw20") + " --data-home {fx}/FILE",
        "is a file; give a directory",
    ),
    "report dir missing": ("report {fx}/nothing --out out/r", "DIR '{fx}/nothing' does not exist"),
    "report dir a file": ("report {fx}/FILE --out out/r", "DIR '{fx}/FILE' is a file"),
    "report dir empty": ("report {fx}/emptydir --out out/r", "holds neither cells/ nor runs.csv"),
    "report out a file": ("report {fx}/run --out {fx}/FILE", "is an existing file"),
    "report out under /proc": ("report {fx}/run --out /proc/x", "cannot be created"),
    "report data home a file": (REPORT + " --data-home {fx}/FILE", "is a file; give a"),
    "report data home missing": (REPORT + " --data-home {fx}/nothing", "does not exist"),
    "check thresholds missing": (
        CHECK.replace("thresholds.json", "nothing.json"),
        "--thresholds '{fx}/nothing.json' does not exist",
    ),
    "check thresholds name not UTF-8": (
        CHECK.replace("thresholds.json", "caf\udce9.json"),
        "--thresholds '{fx}/caf\\udce9.json' does not exist",
    ),
    "check thresholds empty": (
        CHECK.replace("thresholds.json", "empty.json"),
        "is an empty file",
    ),
    "check thresholds not json": (CHECK.replace("thresholds.json", "not.json"), "not valid JSON"),
    "check dir missing": (CHECK.replace("{fx}/run", "{fx}/nothing"), "DIR '{fx}/nothing' does"),
    "check dir a file": (CHECK.replace("{fx}/run", "{fx}/FILE"), "DIR '{fx}/FILE' is a file"),
    "check dir empty": (CHECK.replace("{fx}/run", "{fx}/emptydir"), "holds neither cells/"),
    "calibrate dir missing": (
        CALIBRATE.replace("{fx}/run", "{fx}/nothing"),
        "--calibrate '{fx}/nothing' does not exist",
    ),
    "calibrate dir a file": (CALIBRATE.replace("{fx}/run", "{fx}/FILE"), "is a file; give a"),
    "calibrate write a folder": (
        CALIBRATE.replace("out/t.json", "{fx}/adir"),
        "is a directory; give the thresholds FILE",
    ),
    "calibrate write empty": (
        CALIBRATE.replace("out/t.json", "''"),
        "argument --write: expected a path, got an empty one",
    ),
    "calibrate without write": (CALIBRATE.replace(" --write out/t.json", ""), "needs --write"),
}


def _cases() -> list[tuple[str, str, str, str, int]]:
    """(category, name, command, fragment, status) of every case."""
    out = []
    for category, cases in CASES.items():
        for name, (command, fragment, *status) in cases.items():
            out.append((category, name, command, fragment, status[0] if status else 2))
    for name, spec in PATHS.items():
        if len(spec) == 4:  # (base, fragment, role, path): the role's flag set to the path
            base, fragment, role, path = spec
            argv = shlex.split(base)
            flag = f"--{role}"
            if flag in argv:
                argv[argv.index(flag) + 1] = path
            else:
                argv += [flag, path]
            command = shlex.join(argv)
            out.append(("paths", name, command, fragment, 2))
        else:
            out.append(("paths", name, spec[0], spec[1], 2))
    return out


ALL = _cases()


class WorkStarted(BaseException):
    """Raised where a command's work would begin: the case's input was not refused before."""


def _no_work(*args, **kwargs):
    raise WorkStarted


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("fixtures"))


@pytest.fixture
def no_work(monkeypatch):
    """Every place a command's work begins raises :class:`WorkStarted`."""
    import audit.cell.membership
    import audit.empirical.multi_run
    import audit.release.release_attack
    import audit.report.writer
    import audit.results

    monkeypatch.setattr(audit.results, "sweep_session", _no_work)
    monkeypatch.setattr(audit.cell.membership, "cell_data", _no_work)
    monkeypatch.setattr(audit.empirical.multi_run, "multi_run_audit", _no_work)
    monkeypatch.setattr(audit.release.release_attack, "run_release_attacks", _no_work)
    monkeypatch.setattr(audit.report.writer, "_write", _no_work)


def _argv(command: str, fx: Path) -> list[str]:
    return shlex.split(command.replace("{fx}", str(fx)))


def _parents(argv: list[str]) -> set[Path]:
    """The existing folders holding the absolute paths the command names (outside the
    working folder): none of them may change."""
    found = set()
    for arg in argv:
        for part in arg.split(":"):
            if part.startswith("/") and not part.startswith("/proc"):
                path = Path(part)
                while not path.exists() and path != path.parent:
                    path = path.parent
                found.add(path if path.is_dir() else path.parent)
    return found


def _snapshot(trees: set[Path], folders: set[Path] = frozenset()) -> dict[str, dict[str, int]]:
    """Everything under ``trees``, and the entries of ``folders`` (elsewhere on the machine)."""
    shallow = {str(f): {p.name: p.is_dir() for p in f.iterdir()} for f in folders - trees}
    return {**{str(f): listing(f) for f in trees}, **shallow}


@pytest.mark.parametrize(
    ("category", "name", "command", "fragment", "status"),
    ALL,
    ids=[f"{c[0]}: {c[1]}" for c in ALL],
)
def test_a_bad_input_is_one_line_status_2_and_writes_nothing(
    category, name, command, fragment, status, fx, no_work, tmp_path, monkeypatch, capsys
) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    argv = _argv(command, fx)
    parents = _parents(argv)
    before = _snapshot({fx, work}, parents)
    try:
        code = benchmark.main(argv)
    except WorkStarted:
        pytest.fail(f"{command!r} was not refused before its work began")
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == status, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment.replace("{fx}", str(fx)) in lines[0], lines[0]
    assert _snapshot({fx, work}, parents) == before, f"{command!r} wrote files"


# (command, fragment): run as a real process, a traceback would show here
PROCESS_CASES = {
    "truncated npz": ("--dataset npz:{fx}/truncated.npz --out out", "BadZipFile"),
    "attack on cuda without a GPU": (WITH_SAMPLES + " --device cuda", "--device cuda"),
    "nested thresholds": (CHECK.replace("thresholds.json", "nested.json"), "nested too deeply"),
    "a module that exits 0": (ATTACK + " --decoder {fx}/exits_at_import.py:f", "sys.exit(0)"),
    "a file name that is no UTF-8": (
        WITH_SAMPLES.replace("/samples.npz", "/caf\udce9.npz"),
        "--samples '{fx}/caf\\udce9.npz' does not exist",
    ),
    "benchmark.py's main as the decoder": (
        ATTACK + f" --decoder {ROOT}/benchmark.py:main",
        "returned int",
    ),
}


#: The process cases the default test run skips (each starts Python and torch, ~10 s here).
SLOW_PROCESS_CASES = {
    "a file name that is no UTF-8",
    "truncated npz",
    "attack on cuda without a GPU",
    "benchmark.py's main as the decoder",
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n in SLOW_PROCESS_CASES else n
        for n in sorted(PROCESS_CASES)
    ],
)
def test_a_bad_input_exits_2_with_one_line_in_a_process(name, fx, tmp_path) -> None:
    command, fragment = PROCESS_CASES[name]
    if "cuda" in command and not _missing_device("cuda"):
        pytest.skip("this machine has CUDA")
    argv = _argv(command, fx)
    before = _snapshot({fx, tmp_path})
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmark.py"), *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    assert fragment.replace("{fx}", str(fx)) in lines[0] and result.stdout == "", result.stderr
    assert _snapshot({fx, tmp_path}) == before


def test_tune_without_optuna_names_the_extra(fx, no_work, tmp_path, monkeypatch, capsys) -> None:
    """``--tune`` where Optuna is not installed (hidden here where it is): one line naming the
    extra, status 2, before any work, nothing written."""
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna now raises ImportError
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = _snapshot({fx, work})
    try:
        code = benchmark.main(_argv(SWEEP + " --mech cdp --grid 1 --tune 2", fx))
    except WorkStarted:
        pytest.fail("--tune without Optuna was not refused before its work began")
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0] == (
        "error: --tune needs Optuna, which is not installed; install the extra: "
        "pip install -e '.[tune]'"
    )
    assert _snapshot({fx, work}) == before


def test_the_suite_covers_every_subcommand_and_category() -> None:
    commands = {_argv(c[2], Path("/fx"))[0] for c in ALL}
    sweep = {c for c in commands if c.startswith("--")}
    assert commands - sweep == {"attack", "audit", "check", "epsilon", "report"}
    assert sweep, "no sweep case"
    assert len(ALL) > 200, len(ALL)
