from inferfleet.cli.app import main

main()
