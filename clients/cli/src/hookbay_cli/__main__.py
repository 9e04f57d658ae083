from hookbay_cli.main import main

main()
