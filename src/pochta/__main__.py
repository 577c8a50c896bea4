from pochta.cli import main

main()
