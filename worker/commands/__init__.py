"""The command-line tools: laya-run (worker.commands.cli), laya-bundle, laya-stack, and the checkpoint synthesizer."""
