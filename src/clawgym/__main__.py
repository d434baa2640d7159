from clawgym.cli.app import main

main()
