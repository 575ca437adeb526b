"""Options are taken only as spelled in full: `gangway logs 7 --al` was read as --all until --allow-http came, and
is now an error that names both, as a misspelled option names the one it is like; nothing is asked of the portal."""

from __future__ import annotations

import pytest


def refused(cli, capsys, *args: str) -> tuple[int, str]:
    """The exit code and standard error of a command line argparse refuses."""
    with pytest.raises(SystemExit) as stop:
        cli(*args)
    return stop.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["logs", "7", "--al"], "unknown option --al: options are spelled in full; did you mean --all or --allow-http?"),
        (["logs", "7", "--a"], "unknown option --a: options are spelled in full; did you mean --all or --allow-http?"),
        (["logs", "7", "--fol"], "unknown option --fol: options are spelled in full; did you mean --follow?"),
        (["logs", "7", "--tai=5"], "unknown option --tai: options are spelled in full; did you mean --tail?"),
        (["logs", "7", "--replca", "worker-0"], "unknown option --replca: did you mean --replica?"),
        (["logs", "7", "--fllow"], "unknown option --fllow: did you mean --follow?"),
        (["logs", "7", "--bogus"], "unknown option --bogus; `gangway logs --help` lists the options."),
        (["status", "7", "--js"], "unknown option --js: options are spelled in full; did you mean --json?"),
        (["submit", "job.yaml", "--wai"], "unknown option --wai: options are spelled in full; did you mean --wait?"),
    ],
    ids=["logs --al", "logs --a", "logs --fol", "logs --tai=5", "a replica misspelled", "follow misspelled",
         "an option no command has", "status --js", "submit --wai"],
)  # fmt: skip
def test_an_abbreviated_or_misspelled_option_is_refused_naming_what_was_meant(cli, fake_portal, capsys, args, said):
    code, err = refused(cli, capsys, *args)
    assert code == 2 and fake_portal.requests == []
    assert err.splitlines()[-1] == f"gangway {args[0]}: error: {said}"


def test_the_commands_parsers_take_options_spelled_in_full_only():
    from gangway_cli.arguments import build_parser

    parser = build_parser()
    (commands,) = [action for action in parser._actions if action.dest == "command"]
    assert not parser.allow_abbrev and not any(command.allow_abbrev for command in commands.choices.values())
    args = parser.parse_args(["logs", "7", "--all", "--replica", "worker-0", "--allow-http"])
    assert args.all and args.allow_http and args.replica == "worker-0"
