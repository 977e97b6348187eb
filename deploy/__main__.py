from deploy.console import main

main()
